#!/usr/bin/env python3
"""The planner against published throughput of real clusters (issue #53; bench/published/).

Runs bench/plan_published.py and checks what the planner claims for them: on every source and
GPU (llm-foundry's MPT tables on A100 40GB, A100 80GB and H100, torchtitan's Llama rows on A100)
the median |error| of tokens/s per GPU is within 15%, every llm-foundry row (each of which ran)
fits, the median Spearman correlation over the sweeps is at least 0.7, and in at least 80% of
the sweeps the planner's fastest row is among the three fastest measured
(bench/results/2026-12-02-plan-published-h100).

Usage: published_test.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    build, source = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "published.json")
        r = subprocess.run([sys.executable, os.path.join(source, "bench/plan_published.py"), "--build", build,
                            "--json", out], capture_output=True, text=True)
        print(r.stdout[-6000:])
        if r.returncode != 0:
            print(r.stderr)
            return 1
        result = json.load(open(out))
    failures = []
    for s in result["sources"]:
        if s["median_abs_error"] > 0.15:
            failures.append(f"{s['source']} {s['gpu']}: median |error| {100 * s['median_abs_error']:.1f}% > 15%")
    for row in result["rows"]:
        if row["source"] == "llm-foundry" and not row["fits"]:
            failures.append(f"{row['model']} T={row['seq_len']} on {row['gpus']} {row['gpu']} ran but is predicted not to fit")
    rho = statistics.median(s["spearman"] for s in result["sweeps"])
    if rho < 0.7:
        failures.append(f"median Spearman over {len(result['sweeps'])} sweeps {rho:.2f} < 0.7")
    top3 = sum(s["best_measured_place"] <= 3 for s in result["sweeps"])
    if top3 < 0.8 * len(result["sweeps"]):
        failures.append(f"the planner's fastest row is among the measured top 3 in only {top3} of {len(result['sweeps'])} sweeps")
    if len(result["rows"]) < 200:
        failures.append(f"only {len(result['rows'])} rows planned")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(result['rows'])} rows, median Spearman {rho:.2f}, best among the measured top 3 in {top3} of "
          f"{len(result['sweeps'])} sweeps, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
