#!/usr/bin/env python3
"""Tiny Shakespeare, trident vs PyTorch on the same run (issue #3's quality comparison).

Prepares Tiny Shakespeare with GPT-2 tokens (`trident prepare`), writes one random GPT-2 init
(tests/parity/gpt2_torch.py --write-init), then trains the same configuration from it with
`trident train` and with the independent PyTorch implementation (tests/parity/gpt2_torch.py),
one after the other (so each has the cores to itself), with the sequential sampler:

    L=4, NH=4, C=256, T=256 (block_size 256), B=8, V=50257, 2000 steps, AdamW (0.9, 0.95),
    lr 1e-3, warmup 100, cosine to 1e-4 at step 2000, weight decay 0.1, clip 1.0,
    evaluation every 100 steps over 20 validation batches, fp32, no dropout.

Prints the validation-loss curves side by side as a markdown table, the final losses and each
side's training throughput (tokens/s, evaluation excluded), and writes everything as JSON to
<work>/summary.json. The PyTorch side (about twice trident's time) checkpoints every 100 steps into
<work>/torch_checkpoint.pt and continues from there when the script is run again with the same
--work. Needs shared/data (shakespeare.txt and gpt2/): prints a message and exits
0 without it. Python: stdlib here; the PyTorch side needs torch + numpy (Debian's python3-torch).

    bench/shakespeare_compare.py --trident build/apps/trident            # the full run
    bench/shakespeare_compare.py --trident build/apps/trident --steps 20 --eval-interval 10
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_SCRIPT = os.path.join(REPO, "tests", "parity", "gpt2_torch.py")


def run(cmd, env, log_path=None, log_mode="w"):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.time()
    if log_path:
        with open(log_path, log_mode) as log:
            # stdout goes to the log; stderr (progress) to the log and the terminal. Both
            # writers share the file offset, so lines interleave and never overwrite.
            p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.PIPE, text=True)
            for line in p.stderr:
                log.write(line)
                log.flush()
                sys.stderr.write(line)
                sys.stderr.flush()
            rc = p.wait()
    else:
        rc = subprocess.call(cmd, env=env)
    if rc != 0:
        sys.exit(f"command failed ({rc}): {' '.join(cmd)}" + (f"; log: {log_path}" if log_path else ""))
    return time.time() - t0


def find_trident(explicit):
    if explicit:
        return explicit
    for d in ("build", "build-parity"):
        p = os.path.join(REPO, d, "apps", "trident")
        if os.path.exists(p):
            return p
    sys.exit("no trident binary found: build it (ninja -C build trident_cli) or pass --trident")


def read_trident_metrics(path, tokens_per_step):
    steps, val = {}, {}
    with open(path) as f:
        for line in f:
            m = json.loads(line)
            if "val_loss" in m:
                val[m["step"]] = m["val_loss"]
            else:
                steps[m["step"]] = m
    ordered = [steps[s] for s in sorted(steps)]
    train_time = sum(tokens_per_step / m["tokens_per_s"] for m in ordered if m.get("tokens_per_s"))
    return {
        "train_loss": [m["loss"] for m in ordered],
        "lr": [m["lr"] for m in ordered],
        "grad_norm": [m["grad_norm"] for m in ordered],
        "val_loss": val,
        "tokens_per_s": tokens_per_step * len(ordered) / train_time if train_time > 0 else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident", default="", help="trident binary (default: build/apps/trident)")
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch + numpy")
    ap.add_argument("--text", default=os.path.join(REPO, "..", "shared", "data", "shakespeare.txt"))
    ap.add_argument("--vocab", default=os.path.join(REPO, "..", "shared", "data", "gpt2"))
    ap.add_argument("--work", default="/tmp/trident_shakespeare_compare", help="data, runs and results")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--seq-len", type=int, default=256, help="T (also block_size)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--eval-interval", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1337, help="seed of the shared random init")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trident-precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                    help="trident's precision.dtype (its run and log get the suffix _bf16/_fp16); "
                         "issue #4 compares bf16 and fp32 validation losses with --steps 1000")
    ap.add_argument("--only", choices=["both", "trident", "torch"], default="both",
                    help="run one side (the other's earlier results in --work are reused if present)")
    args = ap.parse_args()

    if not os.path.isfile(args.text) or not os.path.isfile(os.path.join(args.vocab, "vocab.json")):
        print(f"skipping: needs {args.text} and {args.vocab}/vocab.json + merges.txt (shared/data)")
        return 0
    trident = find_trident(args.trident)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(args.threads))
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    train_bin, val_bin = os.path.join(data, "train.bin"), os.path.join(data, "val.bin")
    init = os.path.join(args.work, f"init_seed{args.seed}_L{args.n_layer}_C{args.n_embd}_T{args.seq_len}.safetensors")
    V = 50257

    if not (os.path.exists(train_bin) and os.path.exists(val_bin)):
        run([trident, "prepare", args.text, "--out", data, "--tokenizer", "gpt2", "--vocab", args.vocab,
             "--val-fraction", "0.1"], env)
    model_args = ["--n-layer", str(args.n_layer), "--n-head", str(args.n_head), "--n-embd", str(args.n_embd),
                  "--block-size", str(args.seq_len), "--vocab-size", str(V)]
    if not os.path.exists(init):
        run([args.python, TORCH_SCRIPT, "--write-init", init, "--seed", str(args.seed)] + model_args, env)

    tokens_per_step = args.batch_size * args.seq_len * args.grad_accum
    results = {}
    suffix = "" if args.trident_precision == "fp32" else "_" + args.trident_precision
    tri_dir = os.path.join(args.work, "trident_run" + suffix)
    tri_metrics = os.path.join(tri_dir, "metrics.jsonl")
    if args.only in ("both", "trident"):
        shutil.rmtree(tri_dir, ignore_errors=True)  # metrics.jsonl appends; start clean
        overrides = {
            "model.n_layer": args.n_layer, "model.n_head": args.n_head, "model.n_embd": args.n_embd,
            "model.block_size": args.seq_len, "model.vocab_size": V, "model.dropout": 0.0,
            "data.train_file": train_bin, "data.val_file": val_bin, "data.tokenizer": "gpt2",
            "data.vocab_dir": args.vocab, "data.batch_size": args.batch_size, "data.seq_len": args.seq_len,
            "data.grad_accum_steps": args.grad_accum, "data.sampler": "sequential",
            "optim.lr": args.lr, "optim.beta1": 0.9, "optim.beta2": 0.95, "optim.eps": 1e-8,
            "optim.weight_decay": args.weight_decay, "optim.grad_clip": args.grad_clip,
            "lr_schedule.shape": "cosine", "lr_schedule.warmup_steps": args.warmup,
            "lr_schedule.decay_steps": args.steps, "lr_schedule.min_lr": args.min_lr,
            "train.steps": args.steps, "train.eval_interval": args.eval_interval,
            "train.eval_batches": args.eval_batches, "train.log_interval": 10,
            "train.checkpoint_interval": 0, "train.out_dir": tri_dir, "train.init_from": init,
            "train.resume": "false", "train.threads": args.threads, "precision.dtype": args.trident_precision,
        }
        cmd = [trident, "train"] + [f"--{k}={v}" for k, v in overrides.items()]
        results["trident_wall_s"] = run(cmd, env, os.path.join(args.work, "trident" + suffix + ".log"))
    if os.path.exists(tri_metrics):
        results["trident"] = read_trident_metrics(tri_metrics, tokens_per_step)

    torch_json = os.path.join(args.work, "torch.json")
    if args.only in ("both", "torch"):
        cmd = [args.python, TORCH_SCRIPT, "--init", init, "--train", train_bin, "--val", val_bin,
               "--out", torch_json] + model_args + [
            "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len),
            "--grad-accum", str(args.grad_accum), "--steps", str(args.steps), "--lr", repr(args.lr),
            "--min-lr", repr(args.min_lr), "--warmup", str(args.warmup), "--decay-steps", str(args.steps),
            "--beta1", "0.9", "--beta2", "0.95", "--eps", "1e-8", "--weight-decay", repr(args.weight_decay),
            "--grad-clip", repr(args.grad_clip), "--eval-interval", str(args.eval_interval),
            "--eval-batches", str(args.eval_batches), "--log-interval", "10", "--threads", str(args.threads),
            "--checkpoint", os.path.join(args.work, "torch_checkpoint.pt")]
        # The PyTorch side checkpoints every 100 steps and resumes from there when run again.
        results["torch_wall_s"] = run(cmd, env, os.path.join(args.work, "torch.log"), "a")
    if os.path.exists(torch_json):
        with open(torch_json) as f:
            t = json.load(f)
        results["torch"] = {k: t[k] for k in ("train_loss", "lr", "grad_norm", "tokens_per_s")}
        results["torch"]["val_loss"] = {int(k): v for k, v in t["val_loss"].items()}

    tri, ref = results.get("trident"), results.get("torch")
    cfg = (f"L={args.n_layer} NH={args.n_head} C={args.n_embd} T={args.seq_len} B={args.batch_size} "
           f"accum={args.grad_accum} V={V}, {args.steps} steps, lr {args.lr:g} warmup {args.warmup} cosine to "
           f"{args.min_lr:g}, wd {args.weight_decay:g}, clip {args.grad_clip:g}, sequential sampler, "
           f"init seed {args.seed}, {args.threads} threads")
    print(f"\n### Tiny Shakespeare (GPT-2 tokens): {cfg}\n")
    print("| step | trident val loss | PyTorch val loss | difference | trident train loss | PyTorch train loss |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    steps = sorted(set((tri or {}).get("val_loss", {})) | set((ref or {}).get("val_loss", {})))

    def cell(r, key, s):
        if not r:
            return None
        if key == "val_loss":
            return r["val_loss"].get(s)
        return r["train_loss"][s - 1] if 0 < s <= len(r["train_loss"]) else None

    fmt = lambda v: "" if v is None else f"{v:.4f}"
    for s in steps:
        a, b = cell(tri, "val_loss", s), cell(ref, "val_loss", s)
        d = f"{a - b:+.4f}" if a is not None and b is not None else ""
        print(f"| {s} | {fmt(a)} | {fmt(b)} | {d} | {fmt(cell(tri, 'train', s))} | {fmt(cell(ref, 'train', s))} |")
    print()
    if steps:
        s = steps[-1]
        print(f"final val loss at step {s}: trident {fmt(cell(tri, 'val_loss', s))}, "
              f"PyTorch {fmt(cell(ref, 'val_loss', s))}")
    if tri and ref:
        n = min(len(tri["train_loss"]), len(ref["train_loss"]))
        rel = [abs(a - b) / abs(b) for a, b in zip(tri["train_loss"][:n], ref["train_loss"][:n])]
        first = next((i + 1 for i, d in enumerate(rel) if d > 1e-4), None)
        print(f"train loss, relative difference: max over the first {min(n, 20)} steps "
              f"{max(rel[:20]):.2e}; first step above 1e-4: {first if first else 'none'} (of {n})")
        results["train_loss_rel_diff"] = rel
    for name, r in (("trident", tri), ("PyTorch", ref)):
        if r and r.get("tokens_per_s"):
            print(f"{name}: {r['tokens_per_s']:.0f} tokens/s (training steps, evaluation excluded)")
    summary = os.path.join(args.work, "summary" + suffix + ".json")
    with open(summary, "w") as f:
        json.dump({"config": vars(args), "results": results}, f, indent=1)
    print(f"\nfull results: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
