#!/usr/bin/env python3
"""The planner's predictions against the trainer's measurements (issue #24): runs
bench/plan_accuracy_bench on every listed layout of each config on 1, 2 and 4 ranks
(mpirun --oversubscribe past 1), with `trident calibrate`'s file for that rank count (kept beside --out as
calib_CONFIG_RANKS.toml; another, calib_CONFIG_RANKS_after.toml, is measured after the rows, for
--repredict's BEFORE+AFTER), and
writes one JSON table: per layout, the predicted and measured peak bytes per allocator
category and step time (the fastest measured step's wall and CPU time), with the errors.

Usage: bench/plan_accuracy.py --build build --out bench/results/DATE-planner/plan_accuracy.json
         (resumes: rows already in --out are kept and their layouts not measured again)
         [--runs small:1,small:2,tiny:4,124M:1] [--steps 3] [--only SUBSTRING] [--stride K] [--no-calibrate]
         [--set section.key=value ...]
       bench/plan_accuracy.py --build build --out TABLE.json --repredict small:1=calib1.toml,small:2=calib2.toml
         [--set ... --tag ...]
         (small:2=before.toml+after.toml: each row's step the mean of the two calibrations' predictions)
         [--plan-arg=--flag=value ...]
         (the measured rows of TABLE.json predicted again by this build's planner: a markdown table)
       bench/plan_accuracy.py --build build --out TABLE.json --repredict-memory small:2 [--set ... --tag ...]
         (the rows' predicted memory again, in place)
       bench/plan_accuracy.py --build build --out TABLE.json --repredict-by-rank tiny:2,tiny:4 [--set ... --tag ...]
         (the rows predicted again by this build, rank by rank for activations: a summary and the
         rows that moved, against the predictions the table holds; the table is not changed)
Times: 1 thread per rank, wall clock (Note [Measured step time] in src/planner/measure.cc): time
only on a quiet machine. Memory (peak allocator bytes) does not depend on load: --steps 1
--no-calibrate measures it anywhere.
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
    # As src/planner/named_configs.cc's tiny-moe: a tiny Mixtral, 4 experts, top-2.
    "tiny-moe": "--model.n_layer=4 --model.n_embd=256 --model.n_head=4 --model.block_size=256 --data.seq_len=256 --data.batch_size=8"
                " --model.arch=llama --model.n_kv_heads=2 --model.num_local_experts=4 --model.num_experts_per_tok=2"
                " --model.moe_intermediate_size=512",
}


def mpi(ranks):
    if ranks == 1:
        return []
    return ["mpirun", "-np", str(ranks), "--oversubscribe"]


def repredict(args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rows = json.loads(pathlib.Path(args.out).read_text())["rows"]
    calib = dict(item.split("=") for item in args.repredict.split(","))
    print("| config | ranks | layout | worst memory error | predicted step (s) | measured step (s) | error |")
    print("|---|---|---|---|---|---|---|")
    for key, files in calib.items():
        config, ranks = key.split(":")
        # A+B: calibrations before and after the measurements; each row's step is the mean of
        # their predictions (the VM's speed drifts over minutes: bracketing the rows averages it).
        plans = [json.loads(subprocess.run(
            [str(pathlib.Path(args.build) / "apps/trident"), "plan", "--cluster", file, "--ranks", ranks, "--json",
             "--top", "100000"] + CONFIG_FLAGS[config].split() + ["--train.threads=1"] + ["--" + kv for kv in args.set] +
            args.plan_arg,
            check=True, env=env, capture_output=True, text=True).stdout) for file in files.split("+")]
        by_name = {c["name"]: c for c in plans[0]["ranked"]}
        for other in plans[1:]:
            for c in other["ranked"]:
                if c["name"] in by_name:
                    by_name[c["name"]].setdefault("steps", [by_name[c["name"]]["time_s"]["step"]]).append(c["time_s"]["step"])
        for c in by_name.values():
            if "steps" in c:
                c["time_s"]["step"] = sum(c["steps"]) / len(c["steps"])
        label = f"{config}/{args.tag}" if args.tag else config
        measured = [r for r in rows if r["config"] == label and r["ranks"] == int(ranks) and r["layout"] in by_name]
        best_pred = min(measured, key=lambda r: by_name[r["layout"]]["time_s"]["step"], default=None)
        best_meas = min(measured, key=lambda r: r["step_s"]["measured"], default=None)
        for r in measured:
            c = by_name[r["layout"]]
            worst = 0.0
            for cat, v in r["memory"].items():
                p, m = c["memory_bytes"][cat], v["measured"]
                worst = max(worst, abs(p - m) / m if m > 0 else (1.0 if p > 0 else 0.0))
            t, m = c["time_s"]["step"], r["step_s"]["measured"]
            print(f"| {config} | {ranks} | {r['layout']} | {worst:.3f} | {t:.2f} | {m:.2f} | {t / m - 1:+.3f} |")
        if best_pred:
            print(f"\n{config} on {ranks}: predicted best {best_pred['layout']} measured "
                  f"{best_pred['step_s']['measured']:.2f} s; measured best {best_meas['layout']} "
                  f"{best_meas['step_s']['measured']:.2f} s (the predicted best's tokens/s "
                  f"{best_meas['step_s']['measured'] / best_pred['step_s']['measured'] - 1:+.3f} from the best's)\n")
    return 0


def repredict_memory(args):
    """The rows' predicted memory again, from this build's `trident plan --json` (measured kept)."""
    out_path = pathlib.Path(args.out)
    rows = json.loads(out_path.read_text())["rows"]
    for run in args.repredict_memory.split(","):
        config, ranks = run.split(":")
        label = f"{config}/{args.tag}" if args.tag else config
        plan = json.loads(subprocess.run(
            [str(pathlib.Path(args.build) / "apps/trident"), "plan", "--ranks", ranks, "--json", "--top", "100000"] +
            CONFIG_FLAGS[config].split() + ["--train.threads=1"] + ["--" + kv for kv in args.set],
            check=True, capture_output=True, text=True).stdout)
        by_name = {c["name"]: c for c in plan["ranked"]}
        for r in rows:
            if r["config"] != label or r["ranks"] != int(ranks) or r["layout"] not in by_name:
                continue
            worst = 0.0
            for cat, v in r["memory"].items():
                v["predicted"] = float(by_name[r["layout"]]["memory_bytes"][cat])
                m = v["measured"]
                v["error"] = (v["predicted"] - m) / m if m > 0 else (1.0 if v["predicted"] > 0 else 0.0)
                worst = max(worst, abs(v["error"]))
            r["memory_worst_error"] = worst
            # The rows keep no per-rank bytes, so a per-rank comparison cannot be redone here.
            r.pop("memory_worst_rank_error", None)
    tmp_out = out_path.with_suffix(".tmp")
    tmp_out.write_text(json.dumps({"rows": rows}, indent=1))
    os.replace(tmp_out, out_path)
    return 0


def relative_error(predicted, measured):
    """As plan_accuracy_bench scores it: a prediction where nothing was measured is 100% off."""
    return (predicted - measured) / measured if measured > 0 else (1.0 if predicted > 0 else 0.0)


def worst_error(pairs):
    """The largest relative error of (predicted, measured) pairs, signed."""
    return max((relative_error(p, m) for p, m in pairs), key=abs, default=0.0)


def repredict_by_rank(args):
    """Each row's activations rank by rank and its per-category peaks (the largest over ranks),
    predicted by this build's plan_accuracy_bench --predict-only, against the table's measured
    values and the predictions it holds. The table is not changed."""
    rows = json.loads(pathlib.Path(args.out).read_text())["rows"]
    moved, unmatched = [], []
    summary = {"rows": 0, "worst_before": 0.0, "worst_after": 0.0, "within_1pct_before": 0, "within_1pct_after": 0}
    for run in args.repredict_by_rank.split(","):
        if run.count(":") != 1 or not run.split(":")[1].isdigit():
            sys.exit(f"plan_accuracy.py: --repredict-by-rank '{run}': expected CONFIG:RANKS, e.g. tiny:2")
        config, ranks = run.split(":")
        label = f"{config}/{args.tag}" if args.tag else config
        out = subprocess.run([str(pathlib.Path(args.build) / "bench/plan_accuracy_bench"), "--config", config,
                              "--predict-only", ranks, "--train.threads=1"] + ["--" + kv for kv in args.set],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        predicted = {p["layout"]: p for p in map(json.loads, out.splitlines())}
        for r in rows:
            if r["config"] != label or r["ranks"] != int(ranks):
                continue
            if r["layout"] not in predicted or "activation_by_rank" not in r:
                unmatched.append(f"  {r['ranks']} {r['layout']}")
                continue
            stages = predicted[r["layout"]]["stage_peak_bytes"]
            per_stage = len(r["activation_by_rank"]) // len(stages)
            others = [c for c in r["memory"] if c != "activation"]
            before = worst_error(r["activation_by_rank"] +
                                 [(r["memory"][c]["predicted"], r["memory"][c]["measured"]) for c in others])
            after = worst_error([(stages[q // per_stage]["activation"], m) for q, (_, m) in enumerate(r["activation_by_rank"])] +
                                [(max(s[c] for s in stages), r["memory"][c]["measured"]) for c in others])
            summary["rows"] += 1
            for key, e in (("before", before), ("after", after)):
                summary[f"worst_{key}"] = max(summary[f"worst_{key}"], abs(e))
                summary[f"within_1pct_{key}"] += abs(e) <= 0.01
            if abs(after - before) > 1e-4:
                moved.append(f"  {r['ranks']} {r['layout']:46} {100 * before:+.2f}% -> {100 * after:+.2f}%")
    print(json.dumps(summary))
    print(f"{len(moved)} rows moved (worst per-rank activation or per-category error, signed):")
    print("\n".join(moved))
    if unmatched:
        print(f"{len(unmatched)} rows not compared (the build no longer lists the layout, or the row has no "
              "activation_by_rank):\n" + "\n".join(unmatched))
    if summary["rows"] == 0:
        print("plan_accuracy.py: no row of the table matched (check --repredict-by-rank, --set and --tag)",
              file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", default="tiny:1,tiny:2,tiny:4,small:1,small:2,small:4,124M:1,124M:2,124M:4")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1,
                    help="steps before the measured ones (0: peaks from the first step on; memory only)")
    ap.add_argument("--no-calibrate", action="store_true", help="memory only: predict with the local cluster's defaults")
    ap.add_argument("--set", action="append", default=[], help="section.key=value for every run (e.g. precision.dtype=bf16)")
    ap.add_argument("--tag", default="", help="a label stored in each row (e.g. bf16)")
    ap.add_argument("--only", default="")
    ap.add_argument("--stride", type=int, default=1, help="every K-th listed layout (a sample)")
    ap.add_argument("--repredict", default="")
    ap.add_argument("--plan-arg", action="append", default=[],
                    help="with --repredict: another `trident plan` flag (e.g. --plan-arg=--expert-load=RUN/metrics.jsonl)")
    ap.add_argument("--repredict-memory", default="",
                    help="config:ranks,...: the rows' predicted memory again from this build (with --set/--tag)")
    ap.add_argument("--repredict-by-rank", default="",
                    help="config:ranks,...: compare this build's per-rank predictions with the rows (table unchanged)")
    args = ap.parse_args()
    if args.repredict:
        return repredict(args)
    if args.repredict_memory:
        return repredict_memory(args)
    if args.repredict_by_rank:
        return repredict_by_rank(args)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    build = pathlib.Path(args.build)
    out_path = pathlib.Path(args.out)
    rows = json.loads(out_path.read_text())["rows"] if out_path.exists() else []
    done = {(r["config"], r["ranks"], r["layout"]) for r in rows}
    failed = []
    for run in args.runs.split(","):
        config, ranks = run.split(":")
        ranks = int(ranks)
        flags = CONFIG_FLAGS[config].split() + ["--train.threads=1"] + ["--" + kv for kv in args.set]
        cmd = mpi(ranks) + [str(build / "bench/plan_accuracy_bench"), "--config", config,
                            "--steps", str(args.steps), "--warmup", str(args.warmup), "--train.threads=1"] + ["--" + kv for kv in args.set]
        if not args.no_calibrate:
            calib = out_path.parent / f"calib_{config}_{ranks}.toml"  # kept for --repredict
            out_path.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(mpi(ranks) + [str(build / "apps/trident"), "calibrate", "--out", str(calib)] + flags,
                           check=True, env=env, stdout=subprocess.DEVNULL)
            cmd += ["--cluster", str(calib)]
        if args.only:
            cmd += ["--only", args.only]
        if args.stride > 1:
            cmd += ["--stride", str(args.stride)]
        measured = sorted(layout for (c, n, layout) in done if c == (f"{config}/{args.tag}" if args.tag else config)
                          and n == ranks)
        if measured:  # resuming: the rows already in --out are not measured again
            skip_file = pathlib.Path(tempfile.gettempdir()) / f"plan_accuracy_skip_{os.getpid()}_{config}_{ranks}.txt"
            skip_file.write_text("".join(name + "\n" for name in measured))
            cmd += ["--skip-file", str(skip_file)]
        print(" ".join(cmd), file=sys.stderr, flush=True)
        measured_now = 0
        with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) as p:
            for line in p.stdout:
                row = json.loads(line)
                if args.tag:
                    row["config"] = f"{config}/{args.tag}"
                if (row["config"], row["ranks"], row["layout"]) in done:
                    continue
                rows.append(row)
                measured_now += 1
                s = row["step_s"]
                print(f"{config:5} np{ranks} {row['layout']:44} memory worst {row['memory_worst_error']:+.3f} "
                      f"step predicted {s['predicted']:.2f}s measured {s['measured']:.2f}s "
                      f"(cpu {s['measured_cpu']:.2f}s, comm wait {s['measured_comm_wait']:.2f}s)",
                      file=sys.stderr, flush=True)
                out_path.parent.mkdir(parents=True, exist_ok=True)
                tmp_out = out_path.with_suffix(".tmp")
                tmp_out.write_text(json.dumps({"rows": rows}, indent=1))
                os.replace(tmp_out, out_path)
        if p.returncode != 0:
            # E.g. the kernel's OOM killer (two 124M jobs at once do not fit in 24 GiB): say so, go on
            # with the next run; rerunning the same command measures only what is missing.
            failed.append(f"{config} on {ranks} rank(s): the bench exited with {p.returncode}")
            print(f"plan_accuracy: {failed[-1]}; rerun the command to measure the missing layouts",
                  file=sys.stderr, flush=True)
        if not args.no_calibrate and measured_now > 0:
            # Once more after the measurements: this VM's speed drifts 10-20% over minutes, so the rows
            # are best predicted by the calibrations either side of them (--repredict KEY=BEFORE+AFTER).
            # (A resumed run's rows had their own; only rows measured now get this one.)
            after = out_path.parent / f"calib_{config}_{ranks}_after.toml"
            done_after = subprocess.run(mpi(ranks) + [str(build / "apps/trident"), "calibrate", "--out", str(after)] +
                                        flags, env=env, stdout=subprocess.DEVNULL)
            if done_after.returncode != 0:
                failed.append(f"{config} on {ranks} rank(s): calibrate after the rows exited with {done_after.returncode}")
                print(f"plan_accuracy: {failed[-1]}", file=sys.stderr, flush=True)
            else:
                extra = "".join(f" --set {kv}" for kv in args.set) + (f" --tag {args.tag}" if args.tag else "")
                print(f"plan_accuracy: predicted with both calibrations: --repredict {config}:{ranks}={calib}+{after}"
                      f"{extra}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
