#!/usr/bin/env python3
"""`trident plan` against published throughput of real clusters (issue #53).

Each row of bench/published/*.csv is one run a framework's authors measured and published
(bench/published/README.md names the sources and commits). The script plans that exact layout
with `trident plan --layout ... --convention composer|fsdp --json` on the matching cluster file and prints,
per row, the predicted and measured tokens/s per GPU; per source, the median |error|; per sweep
(one model on one kind of GPU), Spearman's rank correlation of predicted and measured
throughput and where the planner's best row ranks among the measured ones. Rows no cluster file
can express (a GPU without one) are listed and left out of the statistics.

Usage: bench/plan_published.py --build build [--source llm-foundry] [--json OUT.json] [--convention NAME] [--set section.key=value ...]
"""
import argparse
import csv
import json
import math
import pathlib
import statistics
import subprocess
import sys

from rank_correlation import spearman

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
CLUSTERS = {
    "a100_80gb": "configs/clusters/dgx-a100-80gb.toml",
    "a100_40gb": "configs/clusters/dgx-a100-40gb.toml",
    "h100_80gb": "configs/clusters/dgx-h100-80gb.toml",
}
DEVICES_PER_NODE = 8
# The framework each source ran (bench/published/README.md): Composer's FSDP1 with its default
# backward_prefetch = BACKWARD_POST, torchtitan's FSDP2.
CONVENTIONS = {"llm-foundry": "composer", "torchtitan": "fsdp"}


def rows():
    for path in sorted((HERE / "published").glob("*.csv")):
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                r["file"] = path.name
                yield r


def model_flags(r):
    arch = r.get("arch") or "gpt2"
    f = [f"--model.arch={arch}", f"--model.n_layer={r['n_layer']}", f"--model.n_embd={r['n_embd']}",
         f"--model.n_head={r['n_head']}", f"--model.vocab_size={r['vocab_size']}",
         f"--model.block_size={r['seq_len']}", f"--data.seq_len={r['seq_len']}", "--precision.dtype=bf16"]
    if arch == "llama":
        f += [f"--model.n_kv_heads={r['n_kv_heads']}", f"--model.intermediate_size={r['intermediate_size']}"]
    return f


def plan(args, r):
    gpus = int(r["gpus"])
    b, m = int(r["micro_batch"]), int(r["grad_accum"])
    # FULL_SHARD is ZeRO-3. SHARD_GRAD_OP keeps the parameters it gathers in the forward through
    # the backward and reduce-scatters the gradients: one gather a micro-batch, as ZeRO-2's one
    # gather a step only where a step is one micro-batch (every such row here; the trainer's
    # ZeRO-2 gathers after the step, exposed, where FSDP's hides behind the forward).
    zero = 3
    if r.get("sharding") == "SHARD_GRAD_OP":
        if m != 1:
            raise SystemExit(f"{r['model']} on {gpus} {r['gpu']}: SHARD_GRAD_OP with {m} micro-batches has no ZeRO-2 equivalent")
        zero = 2
    layout = f"dp{gpus} zero{zero} ckpt={r['checkpointing']} b{b} m{m}"
    cmd = [str(pathlib.Path(args.build) / "apps/trident"), "plan", "--cluster", str(ROOT / CLUSTERS[r["gpu"]]),
           "--nodes", str(math.ceil(gpus / DEVICES_PER_NODE)), "--ranks", str(gpus), "--convention", args.convention or CONVENTIONS[r["source"]],
           "--layout", layout, f"--data.batch_size={gpus * b * m}", "--json"] + model_flags(r) + ["--" + s for s in args.set] + args.plan_arg
    # Composer's mixed_precision = PURE reduces in bf16 (FSDP's reduce_dtype), DEFAULT in fp32.
    if r.get("mp_mode") == "PURE":
        cmd.append("--parallel.grad_compression=bf16")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return layout, None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    d = json.loads(out.stdout)
    return layout, d["ranked"][0], None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--source", help="only this source (llm-foundry, torchtitan)")
    ap.add_argument("--json", help="write every row and the statistics here")
    ap.add_argument("--set", action="append", default=[], help="section.key=value passed to every plan")
    ap.add_argument("--convention", help="plan every row with this convention instead of its source's framework's")
    ap.add_argument("--plan-arg", action="append", default=[], help="an argument passed to every plan (--plan-arg=--comm-overlap=0.5)")
    args = ap.parse_args()

    done, skipped = [], []
    print("| source | GPU | model | T | GPUs | layout | predicted tok/s/GPU | measured | error | fits |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows():
        if args.source and r["source"] != args.source:
            continue
        if r.get("compiled") == "true":
            skipped.append((r, "torch.compile'd: the planner prices an eager framework's passes only"))
            continue
        if r["gpu"] not in CLUSTERS:
            skipped.append((r, f"no cluster file for {r['gpu']}"))
            continue
        layout, pred, err = plan(args, r)
        if pred is None:
            skipped.append((r, f"plan failed: {err}"))
            continue
        gpus = int(r["gpus"])
        p = pred["tokens_per_s"] / gpus
        meas = float(r["tokens_per_s_per_gpu"])
        e = p / meas - 1.0
        done.append(dict(source=r["source"], gpu=r["gpu"], model=r["model"], seq_len=int(r["seq_len"]), gpus=gpus,
                         layout=layout, predicted=p, measured=meas, error=e, fits=pred["fits"],
                         memory_gib=pred["memory_bytes"]["total"] / 2**30, time_s=pred["time_s"]))
        print(f"| {r['source']} | {r['gpu']} | {r['model']} | {r['seq_len']} | {gpus} | {layout} | {p:.0f} | {meas:.0f} | "
              f"{100 * e:+.1f}% | {'yes' if pred['fits'] else 'NO'} |")

    print()
    print("| source | GPU | rows | median \\|error\\| | median error | within 15% | predicted not to fit |")
    print("|---|---|---|---|---|---|---|")
    stats = {"sources": [], "sweeps": []}
    for key in sorted({(d["source"], d["gpu"]) for d in done}):
        ds = [d for d in done if (d["source"], d["gpu"]) == key]
        med = statistics.median(abs(d["error"]) for d in ds)
        signed = statistics.median(d["error"] for d in ds)
        within = sum(abs(d["error"]) <= 0.15 for d in ds)
        nofit = sum(not d["fits"] for d in ds)
        stats["sources"].append(dict(source=key[0], gpu=key[1], rows=len(ds), median_abs_error=med,
                                     median_error=signed, within_15=within, predicted_not_to_fit=nofit))
        print(f"| {key[0]} | {key[1]} | {len(ds)} | {100 * med:.1f}% | {100 * signed:+.1f}% | {within} | {nofit} |")

    print()
    print("| sweep (source, GPU, model) | rows | Spearman | planner's best is measured # |")
    print("|---|---|---|---|")
    for key in sorted({(d["source"], d["gpu"], d["model"]) for d in done}):
        ds = [d for d in done if (d["source"], d["gpu"], d["model"]) == key]
        if len(ds) < 3:
            continue
        rho = spearman([d["predicted"] for d in ds], [d["measured"] for d in ds])
        best = max(ds, key=lambda d: d["predicted"])
        place = 1 + sum(d["measured"] > best["measured"] for d in ds)
        stats["sweeps"].append(dict(source=key[0], gpu=key[1], model=key[2], rows=len(ds), spearman=rho,
                                    best_measured_place=place))
        print(f"| {key[0]}, {key[1]}, {key[2]} | {len(ds)} | {rho:.2f} | {place} |")

    if skipped:
        print()
        print("Not planned:")
        for r, why in skipped:
            print(f"- {r['source']} {r['gpu']} {r['model']} T={r['seq_len']} GPUs={r['gpus']}"
                  f"{' compiled' if r.get('compiled') == 'true' else ''}: {why}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(dict(rows=done, skipped=[
            dict(source=r["source"], gpu=r["gpu"], model=r["model"], why=why) for r, why in skipped], **stats), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
