#!/usr/bin/env python3
"""Exposed communication per step with and without the MPI progress thread (issue #25 item 4).

Trains the `small` config (L=6, NH=8, C=512, T=512, B=4 global, GPT-2 vocabulary; as
gemm_rates_bench's) data-parallel on 2 ranks for --steps steps, alternately without and with
TRIDENT_COMM_PROGRESS_THREAD=1 (Note [The progress thread] in src/comm/mpi_runtime.cc),
--reps times each, and reads rank 0's metrics: comm_wait_s (the step's exposed communication:
the wait for the gradient all-reduces after the backward, and the loss's all-reduce) and
step_s, the first step of each run left out. Prints the medians and writes them with the CPU
to --out (JSON). Wall times on a shared machine are noisy: the runs alternate so that drift
hits both sides alike.

    bench/overlap_bench.py --trident build/apps/trident --out bench/results/.../overlap.json
"""

import argparse
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compression_compare import add_data_args, prepare, read_metrics, write_json  # noqa: E402
from shakespeare_compare import run  # noqa: E402
from train_speed_compare import cpu_info  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(ap)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench_overlap"))
    ap.add_argument("--out")
    args = ap.parse_args()
    prepared = prepare(args)
    if prepared is None:
        return 0
    trident, base_env, train_bin, _ = prepared
    samples = {"off": {"comm_wait_s": [], "step_s": []}, "on": {"comm_wait_s": [], "step_s": []}}
    for rep in range(args.reps):
        for mode in ("off", "on"):
            out_dir = os.path.join(args.work, f"{mode}{rep}")
            shutil.rmtree(out_dir, ignore_errors=True)
            env = dict(base_env, TRIDENT_COMM_PROGRESS_THREAD="1" if mode == "on" else "0")
            overrides = {"model.n_layer": 6, "model.n_head": 8, "model.n_embd": 512, "model.block_size": 512,
                         "data.train_file": train_bin, "data.val_file": "", "data.batch_size": 4, "data.seq_len": 512,
                         "train.steps": args.steps, "train.checkpoint_interval": 0, "train.out_dir": out_dir,
                         "train.resume": "false", "train.threads": args.threads}
            cmd = [args.mpirun, "-np", "2", "--oversubscribe", "-x", "TRIDENT_COMM_PROGRESS_THREAD", trident, "train"] + \
                [f"--{k}={v}" for k, v in overrides.items()]
            run(cmd, env, os.path.join(args.work, f"{mode}{rep}.log"))
            steps, _ = read_metrics(os.path.join(out_dir, "metrics.jsonl"))
            for m in steps[1:]:
                samples[mode]["comm_wait_s"].append(m["comm_wait_s"])
                samples[mode]["step_s"].append(m["step_s"])
    results = {"benchmark": "overlap_bench", "cpu": cpu_info(), "ranks": 2, "steps": args.steps, "reps": args.reps,
               "config": "small: L=6, NH=8, C=512, T=512, B=4 global, V=50257", "threads_per_rank": args.threads,
               "samples": samples}
    print("| progress thread | exposed comm per step (median s) | step (median s) |")
    print("|---|---|---|")
    for mode in ("off", "on"):
        s = samples[mode]
        results[mode] = {"comm_wait_s_median": statistics.median(s["comm_wait_s"]),
                         "step_s_median": statistics.median(s["step_s"])}
        print(f"| {mode} | {results[mode]['comm_wait_s_median']:.3f} | {results[mode]['step_s_median']:.3f} |")
    write_json(args.out or os.path.join(args.work, "summary.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
