#!/usr/bin/env python3
"""GPT-2 124M losses on the GPU against the CPU, from the same init and tokens (issue #21, step 2).

The GPU half runs on the device machine (scripts/gpu/run.sh parity writes parity_cuda_<p>.log,
train_step_bench's stderr and its JSON line); the CPU half runs here, off the GPU's time, with
the same arguments. Prints one JSON object per precision: per-step relative differences, the
largest, and whether it is within the tolerance of docs/numerics.md (fp32 with TF32 off: 1e-3;
bf16: 2e-2).

    scripts/gpu/parity.py --results DIR [--bench build/bench/train_step_bench] [--cpu-json DIR]
"""
import argparse
import json
import os
import subprocess

ARGS = "--layers 12 --embd 768 --heads 12 --vocab 50257 --T 1024 --B 4 --steps 20 --warmup 0".split()
TOLERANCE = {"fp32": 1e-3, "bf16": 2e-2}


def json_line(path):
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                return json.loads(line)
    raise SystemExit(f"parity: no JSON line in {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", required=True, help="run.sh's results (parity_cuda_<precision>.log)")
    ap.add_argument("--bench", default="build/bench/train_step_bench")
    ap.add_argument("--cpu-json", help="directory with cpu_<precision>.json from an earlier CPU run")
    a = ap.parse_args()
    for precision, tol in TOLERANCE.items():
        gpu = json_line(os.path.join(a.results, f"parity_cuda_{precision}.log"))
        cached = a.cpu_json and os.path.join(a.cpu_json, f"cpu_{precision}.json")
        if cached and os.path.exists(cached):
            cpu = json_line(cached)
        else:
            p = subprocess.run([a.bench, *ARGS, "--device", "cpu", "--precision", precision],
                               capture_output=True, text=True, check=True)
            cpu = json.loads(p.stdout.strip().splitlines()[-1])
        rel = [abs(g - c) / abs(c) for g, c in zip(gpu["losses"], cpu["losses"])]
        print(json.dumps({"precision": precision, "steps": len(rel), "max_rel_diff": max(rel), "tolerance": tol,
                          "within": max(rel) <= tol, "rel_diff": rel, "cuda": gpu["losses"], "cpu": cpu["losses"],
                          "cpu_engines": {k: cpu.get(k) for k in ("f32_gemm", "bf16_gemm", "cpu_isa")}}))


if __name__ == "__main__":
    main()
