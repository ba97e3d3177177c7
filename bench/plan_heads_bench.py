#!/usr/bin/env python3
"""Attention by head size in the planner (issue #53, Note [Attention by head size]): one width,
several head counts, predicted against measured on this machine.

One `trident calibrate` at the model's own head count (it times attention at that head size
and half of it and fits attention_efficiency and attention_half_head_size), then for each head
count: the step the planner predicts for one layout with that file, the step it predicts with
the same file but no fall-off (attention_half_head_size = 0, the efficiency measured at the
model's own head size: the model before this term), and the trainer's measured step
(bench/plan_accuracy_bench: the fastest of --steps, 1 thread). Prints JSON: per head count the
three and the errors, and the Spearman rank correlation of each prediction with the measured
steps. Time only on a quiet machine; timing is never a pass/fail test.

Usage: bench/plan_heads_bench.py [--build build] [--heads 2,4,8,16,32] [--calibrate-heads 8]
         [--layers 6 --embd 512 --seq 512 --batch 4] [--steps 3] [--set section.key=value ...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from rank_correlation import spearman


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--heads", default="2,4,8,16,32")
    ap.add_argument("--calibrate-heads", type=int, default=8)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--embd", type=int, default=512)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], help="section.key=value for every run")
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    trident = os.path.join(a.build, "apps/trident")
    bench = os.path.join(a.build, "bench/plan_accuracy_bench")
    layout = f"dp1 tp1 pp1 zero0 ckpt=none b{a.batch} m1"

    def flags(heads):
        return [f"--model.n_layer={a.layers}", f"--model.n_embd={a.embd}", f"--model.n_head={heads}",
                f"--model.block_size={a.seq}", f"--data.seq_len={a.seq}", f"--data.batch_size={a.batch}",
                "--train.threads=1"] + ["--" + kv for kv in a.set]

    work = tempfile.mkdtemp(prefix="plan_heads_")
    calib = os.path.join(work, "calib.toml")
    subprocess.run([trident, "calibrate", "--out", calib] + flags(a.calibrate_heads), check=True, env=env,
                   stdout=subprocess.DEVNULL)
    text = open(calib).read()
    fitted = {k: float(re.search(rf"^{k} = ([0-9.e+-]+)", text, re.M).group(1))
              for k in ("attention_efficiency", "attention_half_head_size")}
    # The model before the head-size term: the rate measured at the calibration's own head size.
    d0 = a.embd / a.calibrate_heads
    h = fitted["attention_half_head_size"]
    flat_eff = fitted["attention_efficiency"] * d0 / (d0 + h) if h > 0 else fitted["attention_efficiency"]
    flat = os.path.join(work, "calib_no_head_term.toml")
    flat_text = re.sub(r"^attention_half_head_size = .*$", "attention_half_head_size = 0.0", text, flags=re.M)
    flat_text = re.sub(r"^attention_efficiency = .*$", f"attention_efficiency = {flat_eff}", flat_text, flags=re.M)
    open(flat, "w").write(flat_text)

    def predicted(heads, cluster):
        out = subprocess.run([trident, "plan", "--cluster", cluster, "--layout", layout, "--json", "--top", "1"]
                             + flags(heads), check=True, env=env, capture_output=True, text=True).stdout
        return json.loads(out)["ranked"][0]["time_s"]["step"]

    rows = []
    for heads in [int(x) for x in a.heads.split(",")]:
        line = subprocess.run([bench, "--config", "small", "--steps", str(a.steps), "--only", layout, "--cluster", calib]
                              + flags(heads), check=True, env=env, capture_output=True, text=True).stdout
        measured = None
        for l in line.splitlines():
            j = json.loads(l)
            if j["layout"] == layout:
                measured = j["step_s"]["measured"]
        if measured is None:
            sys.exit(f"plan_heads_bench: plan_accuracy_bench measured no {layout} for {heads} heads")
        p, q = predicted(heads, calib), predicted(heads, flat)
        rows.append({"heads": heads, "head_size": a.embd // heads, "measured_s": measured, "predicted_s": p,
                     "error": p / measured - 1.0, "predicted_no_head_term_s": q, "error_no_head_term": q / measured - 1.0})
        print(f"heads {heads:3} (d {a.embd // heads:4}): measured {measured:.3f}s predicted {p:.3f}s ({p / measured - 1:+.1%}) "
              f"without the head term {q:.3f}s ({q / measured - 1:+.1%})", file=sys.stderr, flush=True)
    m = [r["measured_s"] for r in rows]
    print(json.dumps({
        "model": {"layers": a.layers, "embd": a.embd, "seq": a.seq, "batch": a.batch, "layout": layout, "set": a.set},
        "calibrated_at_heads": a.calibrate_heads, "fitted": fitted, "rows": rows,
        "spearman": {"with_head_term": spearman([r["predicted_s"] for r in rows], m),
                     "without": spearman([r["predicted_no_head_term_s"] for r in rows], m)},
    }, indent=1))


if __name__ == "__main__":
    main()
