#!/usr/bin/env python3
"""The planner's NVMe term (issue #52) against measured steps: a LLaMA trains with ZeRO-1 on one
rank (`mpirun -np 1`) in memory and on the NVMe tier, at each of --units (MiB per array of a
tier unit), and `trident plan` predicts each from a cluster file `trident calibrate
--parallel.nvme_path` wrote just before (the disk's rates through the tier's own file).

Printed (JSON), per unit size: the calibrated disk rates; predicted and measured disk bytes a
step (they must be equal); the predicted step, its compute and its exposed disk time; the
measured steps (steps 2 on: the fastest and the median, with their forward-backward and
optimizer seconds and the seconds waited for the disk); and two errors:
  step_error  predicted step / the fastest measured step - 1 (the whole model: the compute's
              error and the disk's);
  disk_error  predicted exposed disk / (the tier's optimizer phase - the in-memory run's) - 1
              (the disk term alone: what the tier adds where the disk is overlapped, if at all).
Timing is never a pass/fail test here: run it on a quiet machine, and more than once.

    bench/plan_nvme_bench.py --trident build/apps/trident --nvme-path /local_nvme/x --out plan_nvme.json
"""
import argparse
import array
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile

MODEL = ["--model.arch=llama", "--model.n_layer=8", "--model.n_embd=1024", "--model.n_head=16",
         "--model.n_kv_heads=16", "--model.intermediate_size=2816", "--model.vocab_size=32000",
         "--model.tie_word_embeddings=false", "--model.block_size=256", "--data.seq_len=256",
         "--data.batch_size=1", "--data.grad_accum_steps=1", "--parallel.bucket_mb=32"]
PLAIN = "dp1 tp1 pp1 zero1 ckpt=none b1 m1"
TIER = "dp1 tp1 pp1 zero1+nvme ckpt=none b1 m1"


def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def predicted(args, common, cluster, layout, env):
    out = run([args.trident, "plan", "--cluster", cluster, "--ranks", "1", "--layout", layout, "--json"] + common, env)
    c = json.loads(out)["ranked"][0]
    return {"step_s": c["time_s"]["step"], "compute_s": c["time_s"]["compute"],
            "exposed_disk_s": c["time_s"]["exposed_disk"], "disk_s": c["time_s"]["disk"],
            "disk_bytes": c.get("disk_bytes"), "optimizer_state_bytes": c["memory_bytes"]["optimizer_state"]}


def measured(args, common, extra, out_dir, env):
    run(["mpirun", "-np", "1", "--bind-to", "none", args.trident, "train", "--parallel.zero_stage=1", f"--train.out_dir={out_dir}",
         f"--train.steps={args.steps}", "--train.checkpoint_interval=0", "--train.eval_interval=0"] + common + extra, env)
    steps = []
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j and j["step"] >= 2:
                steps.append(j)
    fastest = min(steps, key=lambda j: j["step_s"])
    pick = lambda j: {"step_s": j["step_s"], "forward_backward_s": j["forward_backward_s"],
                      "optimizer_s": j["optimizer_s"], "nvme": j.get("nvme")}
    return {"fastest": pick(fastest), "median_step_s": statistics.median(j["step_s"] for j in steps),
            "median_optimizer_s": statistics.median(j["optimizer_s"] for j in steps),
            "steps": [round(j["step_s"], 3) for j in steps]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trident", required=True)
    p.add_argument("--nvme-path", required=True, help="a directory on the disk to measure (the tier's)")
    p.add_argument("--units", default="32,8,256", help="MiB per array of a tier unit, comma-separated")
    p.add_argument("--buffers", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = tempfile.mkdtemp(prefix="plan_nvme_bench_")
    tokens = array.array("H", [random.Random(3).randrange(32000) for _ in range(200000)])
    train_bin = os.path.join(work, "train.bin")
    with open(train_bin, "wb") as f:
        tokens.tofile(f)
    base = MODEL + [f"--train.threads={args.threads}", f"--data.train_file={train_bin}", "--data.val_file=",
                    f"--parallel.nvme_path={args.nvme_path}", f"--parallel.nvme_buffer_count={args.buffers}"]
    results = {"model": MODEL, "threads": args.threads, "buffers": args.buffers, "units": {}}
    plain = measured(args, base, [], os.path.join(work, "plain"), env)
    results["plain"] = plain
    for unit in args.units.split(","):
        common = base + [f"--parallel.nvme_buffer_mb={unit}"]
        cluster = os.path.join(work, f"calib_{unit}.toml")
        run(["mpirun", "-np", "1", "--bind-to", "none", args.trident, "calibrate", "--out", cluster] + common, env)
        rates = {k: float(v.split("#")[0]) for k, v in (line.split(" = ", 1) for line in open(cluster).read().splitlines()
                                                        if line.startswith("disk_"))}
        pred, pred_plain = predicted(args, common, cluster, TIER, env), predicted(args, common, cluster, PLAIN, env)
        tier = measured(args, common, ["--parallel.offload_optimizer=true", "--parallel.offload_optimizer_device=nvme"],
                        os.path.join(work, f"tier_{unit}"), env)
        added = tier["median_optimizer_s"] - plain["median_optimizer_s"]
        f = tier["fastest"]
        results["units"][unit] = {
            "rates_gbs": rates, "predicted": pred, "predicted_plain": pred_plain, "measured": tier,
            "bytes_equal": pred["disk_bytes"] == {"read": f["nvme"]["read_bytes"], "written": f["nvme"]["written_bytes"]},
            "step_error": pred["step_s"] / f["step_s"] - 1.0,
            "measured_added_optimizer_s": added,
            "disk_error": pred["exposed_disk_s"] / added - 1.0 if added > 0 else None,
        }
        print(json.dumps({unit: results["units"][unit]}, indent=1), flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)  # the runs' final checkpoints: several GB each


if __name__ == "__main__":
    main()
