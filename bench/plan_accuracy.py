#!/usr/bin/env python3
"""The planner's predictions against the trainer's measurements (issue #24): runs
bench/plan_accuracy_bench on every listed layout of each config on 1, 2 and 4 ranks
(mpirun --oversubscribe past 1), with `trident calibrate`'s file for that rank count, and
writes one JSON table: per layout, the predicted and measured peak bytes per allocator
category and step time (the fastest measured step's wall and CPU time), with the errors.

Usage: bench/plan_accuracy.py --build build --out bench/results/DATE-planner/plan_accuracy.json
         [--runs small:1,small:2,tiny:4,124M:1] [--steps 2] [--only SUBSTRING]
Times: 1 thread per rank; on a shared machine compare the CPU times (Note [Measured step time]).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

CONFIG_FLAGS = {
    "tiny": "--model.n_layer=4 --model.n_embd=256 --model.n_head=4 --model.block_size=256 --data.seq_len=256 --data.batch_size=8",
    "small": "--model.n_layer=6 --model.n_embd=512 --model.n_head=8 --model.block_size=512 --data.seq_len=512 --data.batch_size=4",
    "124M": "--model.n_layer=12 --model.n_embd=768 --model.n_head=12 --model.block_size=1024 --data.seq_len=1024 --data.batch_size=4",
}


def mpi(ranks):
    if ranks == 1:
        return []
    return ["mpirun", "-np", str(ranks), "--oversubscribe"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", default="tiny:1,tiny:2,tiny:4,small:1,small:2,small:4,124M:1,124M:2,124M:4")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    build = pathlib.Path(args.build)
    out_path = pathlib.Path(args.out)
    rows = json.loads(out_path.read_text())["rows"] if out_path.exists() else []
    done = {(r["config"], r["ranks"], r["layout"]) for r in rows}
    with tempfile.TemporaryDirectory() as tmp:
        for run in args.runs.split(","):
            config, ranks = run.split(":")
            ranks = int(ranks)
            flags = CONFIG_FLAGS[config].split() + ["--train.threads=1"]
            calib = pathlib.Path(tmp) / f"calib_{config}_{ranks}.toml"
            subprocess.run(mpi(ranks) + [str(build / "apps/trident"), "calibrate", "--out", str(calib)] + flags,
                           check=True, env=env, stdout=subprocess.DEVNULL)
            cmd = mpi(ranks) + [str(build / "bench/plan_accuracy_bench"), "--config", config, "--cluster", str(calib),
                                "--steps", str(args.steps), "--train.threads=1"]
            if args.only:
                cmd += ["--only", args.only]
            print(" ".join(cmd), file=sys.stderr, flush=True)
            with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) as p:
                for line in p.stdout:
                    row = json.loads(line)
                    if (row["config"], row["ranks"], row["layout"]) in done:
                        continue
                    rows.append(row)
                    s = row["step_s"]
                    print(f"{config:5} np{ranks} {row['layout']:44} memory worst {row['memory_worst_error']:+.3f} "
                          f"step predicted {s['predicted']:.2f}s cpu {s['measured_cpu']:.2f}s wall {s['measured']:.2f}s",
                          file=sys.stderr, flush=True)
                    out_path.parent.mkdir(parents=True, exist_ok=True)
                    tmp_out = out_path.with_suffix(".tmp")
                    tmp_out.write_text(json.dumps({"rows": rows}, indent=1))
                    os.replace(tmp_out, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
