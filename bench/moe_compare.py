#!/usr/bin/env python3
"""Mixture-of-experts training speed (issue #51): trident's sparse model against its dense twin,
its grouped expert products against a loop of per-expert products, and PyTorch running the
same model as transformers writes it, side by side in one run.

The pair (bench/train_speed_compare.py's configs): "moe8x2", a LLaMA of 4 layers, width 384,
8 experts per layer, top-2, each expert 512 wide; and "llama_dense", the same model with one
dense MLP 1024 wide, so that a token's active parameters are the same and the sparse MLPs hold 4x
the dense one's. Both train on random tokens (forward, backward, global-norm clipping, AdamW),
trident through train_step_bench, PyTorch (Debian's 1.13) through train_speed_compare.py's worker
with tests/parity/llama_torch.py's model: MixtralSparseMoeBlock's loop over the experts. Both
sides add the load-balancing loss at 0.001. PyTorch's settings are probed as
train_speed_compare.py probes them (allocator, OMP wait policy, ATen's ISA, OpenBLAS build and
kernels) on the sparse model itself, and printed.

In `--reps` rounds, in turns: trident sparse (grouped), trident sparse with TRIDENT_MOE_GROUPED=0
(each expert through its own layers: the loop the grouped products replace), trident dense,
PyTorch sparse. Each is its own process, `--warmup` untimed steps then `--steps` timed; a run's
time is its median step, a side's the median over rounds. Prints one JSON object: the CPU, each
side's tokens/s, peak RSS and settings, and the ratios sparse/dense, grouped/loop and
trident/PyTorch.

Usage: moe_compare.py [--trident-bench build/bench/train_step_bench] [--threads 2] [--steps 6]
       [--warmup 2] [--reps 3] [--python /usr/bin/python3] [--torch-settings allocator=tcmalloc,...]
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_speed_compare as tsc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident-bench", default=os.path.join(tsc.REPO, "build", "bench", "train_step_bench"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--probe-steps", type=int, default=3)
    ap.add_argument("--probe-margin", type=float, default=0.03)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--torch-settings", default="")
    ap.add_argument("--checkpointing", default="none")
    args = ap.parse_args()
    args.lora = ""
    cpu = tsc.cpu_info()
    cand = tsc.torch_candidates(cpu)
    sparse, dense = tsc.CONFIGS["moe8x2"], tsc.CONFIGS["llama_dense"]
    tri_env = dict(tsc.base_env(args.threads), OMP_WAIT_POLICY="PASSIVE")
    if args.torch_settings:
        best, probe_s = tsc.parse_settings(args.torch_settings, cand), 0.0
    else:
        best, _, probe_s = tsc.duel_probe(
            "moe8x2 fp32", cand,
            lambda s, against: tsc.run_child(tsc.torch_cmd(args, "moe8x2", args.probe_steps, 1, "fp32"),
                                             tsc.torch_env(s, cand, args.threads), allow_fail=True)[0],
            lambda r: r["median_step_ms"], args.probe_margin)
    torch_env = tsc.torch_env(best, cand, args.threads)
    runs = {"trident_sparse": [], "trident_sparse_loop": [], "trident_dense": [], "pytorch_sparse": []}
    for _ in range(args.reps):
        runs["trident_sparse"].append(tsc.run_child(tsc.trident_cmd(args, sparse, args.steps, "fp32", []), tri_env)[0])
        runs["trident_sparse_loop"].append(tsc.run_child(tsc.trident_cmd(args, sparse, args.steps, "fp32", []),
                                                         dict(tri_env, TRIDENT_MOE_GROUPED="0"))[0])
        runs["trident_dense"].append(tsc.run_child(tsc.trident_cmd(args, dense, args.steps, "fp32", []), tri_env)[0])
        runs["pytorch_sparse"].append(tsc.run_child(tsc.torch_cmd(args, "moe8x2", args.steps, args.warmup, "fp32"),
                                                    torch_env)[0])
    tokens = sparse["B"] * sparse["T"]
    out = {"cpu": cpu, "threads": args.threads, "steps": args.steps, "warmup": args.warmup, "reps": args.reps,
           "configs": {"sparse": sparse, "dense": dense},
           "pytorch_settings": tsc.settings_str(best), "pytorch_probe_s": probe_s, "sides": {}}
    for name, rs in runs.items():
        ms = statistics.median(r["median_step_ms"] for r in rs)
        out["sides"][name] = {"median_step_ms": ms, "tokens_per_s": tokens / (ms / 1e3),
                              "runs_step_ms": [r["median_step_ms"] for r in rs],
                              "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in rs),
                              "params": rs[0].get("params"), "allocator": rs[0]["allocator"], "blas": rs[0]["blas"]}
    s = out["sides"]
    out["ratios"] = {
        "sparse_over_dense_tokens_per_s": s["trident_sparse"]["tokens_per_s"] / s["trident_dense"]["tokens_per_s"],
        "grouped_over_loop": s["trident_sparse_loop"]["median_step_ms"] / s["trident_sparse"]["median_step_ms"],
        "trident_over_pytorch": s["pytorch_sparse"]["median_step_ms"] / s["trident_sparse"]["median_step_ms"],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
