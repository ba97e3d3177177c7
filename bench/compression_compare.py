#!/usr/bin/env python3
"""Compressed gradients on Tiny Shakespeare (issue #25): validation loss and bytes per step.

Trains the tiny config (configs/shakespeare.toml: L=4, NH=4, C=256, T=256, B=8 global, GPT-2
tokens) data-parallel on --ranks ranks (mpirun) from the same init (the model's seed), once per
parallel.grad_compression (none, bf16, powersgd at --powersgd-rank, onebit_adam), with the
sequential sampler, and compares each compressed run's final validation loss with the
uncompressed AdamW run's. PowerSGD compresses from --warmup steps on, 1-bit Adam freezes its
variance after --warmup steps. Bytes per step are rank 0's communication counters (metrics
comm_bytes: every collective of the step, the loss's all-reduce included), before and after
the warm-up. Writes everything, with the CPU, to --out (JSON) and prints a markdown table.

    bench/compression_compare.py --trident build/apps/trident --steps 1000 --out bench/results/...json

Needs shared/data (shakespeare.txt and gpt2/): prints a message and exits 0 without it.
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shakespeare_compare import find_trident, run  # noqa: E402
from train_speed_compare import cpu_info  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_data_args(ap):
    ap.add_argument("--trident")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--text", default=os.path.join(REPO, "..", "shared", "data", "shakespeare.txt"))
    ap.add_argument("--vocab", default=os.path.join(REPO, "..", "shared", "data", "gpt2"))


def prepare(args):
    """(trident, env for mpirun, train.bin, val.bin), or None (with a message) without shared/data."""
    if not os.path.isfile(args.text) or not os.path.isfile(os.path.join(args.vocab, "vocab.json")):
        print(f"skipping: needs {args.text} and {args.vocab}/vocab.json + merges.txt (shared/data)")
        return None
    trident = find_trident(args.trident)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(args.threads),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    train_bin, val_bin = os.path.join(data, "train.bin"), os.path.join(data, "val.bin")
    if not (os.path.exists(train_bin) and os.path.exists(val_bin)):
        run([trident, "prepare", args.text, "--out", data, "--tokenizer", "gpt2", "--vocab", args.vocab,
             "--val-fraction", "0.1"], env)
    return trident, env, train_bin, val_bin


def write_json(path, results):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    print(f"wrote {path}")


def read_metrics(path):
    steps, val = [], {}
    with open(path) as f:
        for line in f:
            m = json.loads(line)
            if "val_loss" in m:
                val[m["step"]] = m["val_loss"]
            elif "loss" in m:
                steps.append(m)
    return steps, val


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(ap)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100, help="PowerSGD's start step (and 1-bit Adam's warm-up)")
    ap.add_argument("--onebit-warmup", type=int, help="1-bit Adam's warm-up, if not --warmup (DeepSpeed: 15-25%% "
                    "of the run, after the lr warm-up)")
    ap.add_argument("--onebit-block", type=int, default=0, help="1-bit Adam's elements per scale "
                    "(parallel.onebit_block; 0: one per buffer and chunk, as DeepSpeed)")
    ap.add_argument("--onebit-bound", action="store_true", help="parallel.onebit_bound_update = true")
    ap.add_argument("--reuse", action="store_true", help="keep the runs already complete in --work")
    ap.add_argument("--powersgd-rank", type=int, default=4)
    ap.add_argument("--eval-interval", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--kinds", default="none,bf16,powersgd,onebit_adam")
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench_compression"))
    ap.add_argument("--out", help="JSON results (default: <work>/summary.json)")
    args = ap.parse_args()

    prepared = prepare(args)
    if prepared is None:
        return 0
    trident, env, train_bin, val_bin = prepared
    results = {"benchmark": "compression_compare", "cpu": cpu_info(), "ranks": args.ranks, "steps": args.steps,
               "warmup": args.warmup, "powersgd_rank": args.powersgd_rank, "threads_per_rank": args.threads,
               "config": "configs/shakespeare.toml (tiny: L=4, NH=4, C=256, T=256, B=8 global)", "runs": {}}
    onebit_warmup = args.onebit_warmup or args.warmup
    results["onebit_warmup"] = onebit_warmup
    results["onebit_block"] = args.onebit_block
    results["onebit_bound_update"] = args.onebit_bound
    for kind in args.kinds.split(","):
        out_dir = os.path.join(args.work, kind)
        metrics = os.path.join(out_dir, "metrics.jsonl")
        warmup = onebit_warmup if kind == "onebit_adam" else args.warmup
        done = args.reuse and os.path.exists(metrics) and any(m["step"] == args.steps for m in read_metrics(metrics)[0])
        overrides = {
            "data.train_file": train_bin, "data.val_file": val_bin, "data.sampler": "sequential",
            "lr_schedule.decay_steps": args.steps, "train.steps": args.steps,
            "train.eval_interval": args.eval_interval, "train.eval_batches": args.eval_batches,
            "train.checkpoint_interval": 0, "train.out_dir": out_dir, "train.resume": "false",
            "train.threads": args.threads, "parallel.grad_compression": kind,
            "parallel.powersgd_rank": args.powersgd_rank, "parallel.powersgd_start_step": args.warmup,
            "parallel.onebit_warmup_steps": onebit_warmup, "parallel.onebit_block": args.onebit_block,
            "parallel.onebit_bound_update": str(args.onebit_bound).lower(),
        }
        cmd = [args.mpirun, "-np", str(args.ranks), "--oversubscribe", trident, "train", "--config",
               os.path.join(REPO, "configs", "shakespeare.toml")] + [f"--{k}={v}" for k, v in overrides.items()]
        if not done:
            shutil.rmtree(out_dir, ignore_errors=True)  # metrics.jsonl appends; start clean
        wall = None if done else run(cmd, env, os.path.join(args.work, kind + ".log"))
        steps, val = read_metrics(metrics)
        before = [m["comm_bytes"] for m in steps if m["step"] <= warmup]
        after = [m["comm_bytes"] for m in steps if m["step"] > warmup]
        # What rank 0 put on the wire (Note [Link classes]; builds before it: absent).
        sent = [m["comm_sent_bytes"] for m in steps if m["step"] > warmup and "comm_sent_bytes" in m]
        results["runs"][kind] = {
            "final_val_loss": val[max(val)], "val_loss": val, "final_train_loss": steps[-1]["loss"],
            "comm_bytes_per_step_warmup": before[-1] if before else None,
            "comm_bytes_per_step_after": after[-1] if after else None,
            "comm_sent_bytes_per_step_after": sent[-1] if sent else None,
            "step_s_median": sorted(m["step_s"] for m in steps)[len(steps) // 2], "wall_s": wall,
            "compression_from_step": warmup if kind != "none" else None,
        }
    base = results["runs"].get("none")
    print(f"\n{args.ranks} ranks, {args.steps} steps, warm-up {args.warmup}, cpu {results['cpu']['model_name']}\n")
    print("| grad_compression | final val loss | vs none | bytes/step after warm-up | vs none | sent/step | vs none |")
    print("|---|---|---|---|---|---|---|")
    for kind, r in results["runs"].items():
        if base:
            r["val_loss_vs_none"] = r["final_val_loss"] / base["final_val_loss"] - 1.0
            if r["comm_bytes_per_step_after"] and base["comm_bytes_per_step_after"]:
                r["bytes_vs_none"] = r["comm_bytes_per_step_after"] / base["comm_bytes_per_step_after"]
            if r["comm_sent_bytes_per_step_after"] and base["comm_sent_bytes_per_step_after"]:
                r["sent_vs_none"] = r["comm_sent_bytes_per_step_after"] / base["comm_sent_bytes_per_step_after"]
        sent = r["comm_sent_bytes_per_step_after"]
        sent_ratio = f"{r['sent_vs_none']:.4f}" if "sent_vs_none" in r else "-"
        print(f"| {kind} | {r['final_val_loss']:.4f} | {100 * r.get('val_loss_vs_none', 0):+.2f}% | "
              f"{r['comm_bytes_per_step_after']} | {r.get('bytes_vs_none', 1):.4f} | {sent or '-'} | {sent_ratio} |")
    write_json(args.out or os.path.join(args.work, "summary.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
