#!/usr/bin/env python3
"""The planner's step by part beside a measured step's (issue #53): which mechanism a
prediction misses, not only by how much.

Plans the run (`trident plan --json` on the overrides, --layout pinning the layout), trains that
layout with train.profile_step (the plan's own overrides for it; or reads a profile JSON such a
run wrote), and prints one row per part: the planner's seconds (TimeEstimate's parts,
`plan --explain`) and the profiled step's, with train.profile_step's rows grouped as below.

  products    linear, linear_gelu_tanh, matmul         (the blocks' products, routers)
  experts     grouped_linear*                          (a mixture's expert products)
  attention   attention
  head        linear_cross_entropy.{logits,dx,dw}_gemm (with tp > 1 the head's product is a
              `linear` row: products and head are then one row, "products")
  loss        linear_cross_entropy (its own), .softmax, vocab-parallel loss passes
  adapters    lora*                                    (LoRA's factors)
  optimizer   the optimizer phase's rows (adamw, clip_grad_norm, zero_grad)
  accumulate  AccumulateGrad
  recompute   the recompute phase's rows
  comm        the communication phase's rows           (planned: exposed dp + tp + ep + pp)
  memory      every other op of the forward and backward (norms, activations, rope, gathers)

Usage: bench/plan_vs_profile.py --build build --cluster CALIB.toml [--ranks N] [--layout "b1 m8 ..."]
         [--plan-arg=--flag=value ...] [--profile FILE] [--data-dir DIR] [--step N] [--json OUT]
         -- --section.key=value ...
  The overrides are the plan's (data.batch_size: the global batch), as bench/plan_accuracy.py's
  configs write them.
  Without --profile it trains (mpirun -np N past one rank) on --data-dir's train.bin and
  val.bin for --step steps, profiling the last, 1 thread per rank, and reads rank 0's profile.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

PARTS = ["products", "experts", "attention", "memory", "adapters", "head", "loss", "recompute", "optimizer",
         "accumulate", "comm", "bubble"]


def part_of(row, tp):
    name, phase = row["name"], row["phase"]
    if phase == "recompute":
        return "recompute"
    if phase == "optimizer":
        return "optimizer"
    if phase == "communication":
        return "comm"
    if phase in ("data", "other"):
        return "memory"
    if name.startswith("linear_cross_entropy.") and name.endswith("_gemm"):
        return "head"
    if name.startswith("linear_cross_entropy") or name.startswith("vocab_parallel") or name == "cross_entropy":
        return "loss"
    if name.startswith("grouped_linear"):
        return "experts"
    if name.startswith("lora"):
        return "adapters"
    if name in ("linear", "matmul") or name.startswith("linear_"):  # linear_gelu_tanh: a product and its GELU
        return "products"
    if name == "attention":
        return "attention"
    if name == "AccumulateGrad":
        return "accumulate"
    return "memory"


def measured_parts(profile, tp):
    out = {p: 0.0 for p in PARTS}
    for row in profile["rows"]:
        out[part_of(row, tp)] += row["self_ms"] / 1e3
    # Wall time outside every scope (the profile's coverage) goes with the memory-bound ops.
    out["memory"] += max(0.0, profile["wall_ms"] - profile["self_ms"]) / 1e3
    return out


def planned_parts(candidate):
    p = dict(candidate["time_parts_s"])
    out = {k: p.get(k, 0.0) for k in PARTS}
    out["comm"] = p["dp_exposed"] + p["tp"] + p["ep"] + p.get("skew", 0.0) + p["pp_exposed"]
    out["bubble"] = p["bubble"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--layout", default="", help="the layout's words, as `trident plan --layout` takes them")
    ap.add_argument("--plan-arg", action="append", default=[],
                    help="another `trident plan` flag (repeat; e.g. --plan-arg=--expert-load=RUN/metrics.jsonl)")
    ap.add_argument("--profile", help="a profile_stepN.json already written (else train and profile)")
    ap.add_argument("--data-dir", default="/tmp/moe/data")
    ap.add_argument("--step", type=int, default=4, help="steps to train; the last is profiled")
    ap.add_argument("--json", help="also write the table as JSON here")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    trident = str(pathlib.Path(args.build) / "apps/trident")
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    overrides = [o for o in args.overrides if o != "--"] + ["--train.threads=1"]
    plan = json.loads(subprocess.run(
        [trident, "plan", "--cluster", args.cluster, "--ranks", str(args.ranks), "--json", "--top", "1"] +
        (["--layout", args.layout] if args.layout else []) + args.plan_arg + overrides,
        env=env, check=True, capture_output=True, text=True).stdout)
    if not plan["ranked"]:
        sys.exit(f"plan_vs_profile: no layout of {args.layout!r} on {args.ranks} rank(s)")
    if args.profile:
        profile = json.loads(pathlib.Path(args.profile).read_text())
    else:
        out_dir = tempfile.mkdtemp(prefix="plan_vs_profile_")
        mpi = [] if args.ranks == 1 else ["mpirun", "-np", str(args.ranks), "--oversubscribe", "--bind-to", "none"]
        data = pathlib.Path(args.data_dir)
        for f in ("train.bin", "val.bin"):
            if not (data / f).exists():
                sys.exit(f"plan_vs_profile: no {data / f}: `trident prepare --out {data} ...` writes it")
        cmd = mpi + [trident, "train", f"--data.train_file={data / 'train.bin'}", f"--data.val_file={data / 'val.bin'}",
                     f"--train.steps={args.step}", f"--train.profile_step={args.step}", f"--train.out_dir={out_dir}",
                     "--train.eval_interval=0", "--train.checkpoint_interval=0"] + overrides + plan["ranked"][0]["overrides"]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"plan_vs_profile: {' '.join(cmd)} failed:\n{run.stderr[-3000:]}")
        profile = json.loads((pathlib.Path(out_dir) / f"profile_step{args.step}.json").read_text())
        print(f"profiled run: {out_dir} (its metrics.jsonl, profile_step{args.step}.json)")
    candidate = plan["ranked"][0]
    tp = candidate["layout"]["tp"]
    planned, measured = planned_parts(candidate), measured_parts(profile, tp)
    if tp > 1:  # the vocabulary-parallel head's product is a `linear` row like the blocks'
        for side in (planned, measured):
            side["products"] += side.pop("head")
    print(f"{candidate['name']} on {args.ranks} rank(s): planned {candidate['time_s']['step']:.3f} s, "
          f"profiled step {profile['wall_ms'] / 1e3:.3f} s (rank {profile.get('rank', 0)})")
    print(f"{'part':<12} {'planned s':>10} {'measured s':>11} {'difference':>11} {'of the step':>12}")
    wall = profile["wall_ms"] / 1e3
    rows = []
    for p in PARTS:
        if p not in planned:
            continue
        a, b = planned[p], measured[p]
        if a == 0.0 and b == 0.0:
            continue
        rows.append({"part": p, "planned_s": a, "measured_s": b})
        print(f"{p:<12} {a:>10.4f} {b:>11.4f} {a - b:>+11.4f} {(a - b) / wall:>+11.1%}")
    total_p, total_m = sum(planned.values()), sum(measured.values())
    print(f"{'total':<12} {total_p:>10.4f} {total_m:>11.4f} {total_p - total_m:>+11.4f} {(total_p - total_m) / wall:>+11.1%}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"layout": candidate["name"], "ranks": args.ranks, "overrides": overrides, "planned_step_s": candidate["time_s"]["step"],
             "profiled_wall_s": wall, "parts": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
