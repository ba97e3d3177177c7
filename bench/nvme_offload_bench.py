#!/usr/bin/env python3
"""ZeRO-Infinity's optimizer tier under a memory limit (issue #52): plain vs NVMe, with fio.

A LLaMA (GPT-2's vocabulary, Tiny Shakespeare tokens from `trident prepare`) trains with ZeRO-1 on
one rank (`mpirun -np 1`), twice, each inside a cgroup (v1 memory controller) whose limit the
plain run's state exceeds:
  plain  parameters (fp32, or bf16 with --dtype bf16), fp32 gradients, masters and AdamW moments
         in memory (16 B/param in fp32; bf16 adds 2 for the compute copy), plus activations;
  nvme   parallel.offload_optimizer_device = "nvme": the masters and moments (12 B/param) in a
         scratch file under --nvme-path, read and written unit by unit each step.
Around them, fio (Debian's package) measures the file system under --nvme-path, before and after
the runs (this VM's shared disk has moved 2-3.6x between probes minutes apart): sequential 1 MiB
reads, writes, and a 50/50 mix of the two at once (the tier reads a unit while it writes
another), io_uring, O_DIRECT, the tier's queue depth, over --fio-mib (default 16 GiB: a step
moves tens of GB, so a short probe measures the disk's burst instead). Each rate is the mean of
the two probes, and both are printed.

Printed (JSON): each run's exit status, whether the cgroup's OOM killer fired, its peak memory
(the cgroup's max_usage_in_bytes) and, for the nvme run, per step (the first, which also reads
what the start wrote, left out; medians): step_s, the seconds it waited for the disk (wait_s),
compute_s = step_s - wait_s, optimizer_s (the phase the tier's traffic moves in), the bytes read
and written, and the disk's time for them at fio's rates two ways: disk_s = (read + written) /
the mixed rate (the tier's pattern), disk_separate_s = read / read rate + written / write rate:
  step_over_bound   = step_s / max(compute_s, disk_s)                (issue #52: <= 1.5)
  io_efficiency     = the tier's bandwidth over the step, (read + written) / step_s, over fio's
                      mixed rate (issue: >= 0.7)
  io_efficiency_optimizer = the same over the optimizer phase, the window the bytes move in: a
                      rank's state does not fit in memory, so none of it can be read ahead of the
                      forward and backward, beyond the staging buffers (a step's last writes,
                      at most the buffers, complete during the next forward).
The same ratios against the separate rates are printed beside them (*_separate).
Run as root (the cgroup and fio's O_DIRECT file). Timing is never a pass/fail test here.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CGROUP = "/sys/fs/cgroup/memory"


def fio(path, rw, size_mib, depth):
    """fio's rate in bytes/s for rw in read, write, rw (50/50 at once: the sum of both sides)."""
    f = os.path.join(path, "fio_probe.bin")
    out = subprocess.run(["fio", "--name=probe", f"--filename={f}", f"--size={size_mib}M", "--bs=1M", f"--rw={rw}",
                          "--rwmixread=50", "--direct=1", "--ioengine=io_uring", f"--iodepth={depth}", "--numjobs=1",
                          "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return {"read": job["read"]["bw_bytes"], "write": job["write"]["bw_bytes"],
            "rw": job["read"]["bw_bytes"] + job["write"]["bw_bytes"]}[rw]


def fio_probe(path, size_mib, depth):
    rates = {rw: fio(path, rw, size_mib, depth) for rw in ("write", "read", "rw")}
    os.remove(os.path.join(path, "fio_probe.bin"))
    return rates


def machine_memory():
    with open("/proc/meminfo") as f:
        return int(re.search(r"MemTotal:\s+(\d+) kB", f.read()).group(1)) * 1024


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def run_limited(name, cmd, limit_bytes, env):
    """Runs cmd in a fresh memory cgroup limited to limit_bytes; returns what happened."""
    group = os.path.join(CGROUP, f"trident_nvme_bench_{os.getpid()}_{name}")
    os.makedirs(group, exist_ok=True)
    with open(os.path.join(group, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit_bytes))
    swap = os.path.join(group, "memory.memsw.limit_in_bytes")
    if os.path.exists(swap):
        with open(swap, "w") as f:
            f.write(str(limit_bytes))

    def enter():
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    t0 = time.time()
    p = subprocess.run(cmd, preexec_fn=enter, capture_output=True, text=True, env=env)
    wall = time.time() - t0
    with open(os.path.join(group, "memory.max_usage_in_bytes")) as f:
        peak = int(f.read())
    with open(os.path.join(group, "memory.oom_control")) as f:
        oom = dict(line.split() for line in f.read().splitlines())
    tail = p.stderr.strip().splitlines()[-4:]
    try:
        os.rmdir(group)
    except OSError:
        pass
    return {"exit": p.returncode, "oom_kills": int(oom.get("oom_kill", 0)), "peak_bytes": peak, "wall_s": round(wall, 1),
            "tail": tail}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident", default="build/apps/trident")
    ap.add_argument("--data", default="build/data/shakespeare", help="trident prepare's output (train.bin, val.bin)")
    ap.add_argument("--nvme-path", required=True, help="directory on the disk under test")
    ap.add_argument("--limit-gib", type=float, required=True, help="the cgroup's memory limit for both runs")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--embd", type=int, default=1280)
    ap.add_argument("--intermediate", type=int, default=3456)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--fio-mib", type=int, default=16384, help="fio's file (a step moves tens of GB)")
    ap.add_argument("--bucket-mb", type=float, default=32)
    ap.add_argument("--buffers", type=int, default=3, help="parallel.nvme_buffer_count")
    ap.add_argument("--queue-depth", type=int, default=128, help="parallel.nvme_queue_depth (requests in flight)")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                    help="precision.dtype: bf16 keeps 2 B/param of parameters in memory, fp32 masters on the tier")
    ap.add_argument("--zero-stage", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the runs' directories (checkpoints are as large as the tier)")
    a = ap.parse_args()
    if not os.path.isdir(CGROUP):
        sys.exit(f"nvme_offload_bench: no cgroup v1 memory controller at {CGROUP}")
    os.makedirs(a.nvme_path, exist_ok=True)
    fio_before = fio_probe(a.nvme_path, a.fio_mib, a.queue_depth)

    C, L, I = a.embd, a.layers, a.intermediate
    params = 2 * 50257 * C + L * (4 * C * C + 3 * C * I + 2 * C) + C  # untied head
    work = tempfile.mkdtemp(prefix="nvme_bench_")
    base = [a.trident, "train", "--model.arch=llama", f"--model.n_layer={L}", f"--model.n_embd={C}",
            f"--model.n_head={C // 64}", f"--model.n_kv_heads={C // 64}", f"--model.intermediate_size={I}",
            f"--model.block_size={a.seq}", "--model.vocab_size=50257",
            f"--data.train_file={a.data}/train.bin", f"--data.val_file={a.data}/val.bin", "--data.batch_size=1",
            f"--data.seq_len={a.seq}", f"--train.steps={a.steps}", "--train.eval_interval=0",
            "--train.checkpoint_interval=0", "--train.threads=2", f"--parallel.zero_stage={a.zero_stage}",
            f"--parallel.bucket_mb={a.bucket_mb}", f"--precision.dtype={a.dtype}"]
    mpirun = ["mpirun", "-np", "1", "--bind-to", "none"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_WAIT_POLICY="PASSIVE")
    limit = int(a.limit_gib * 2**30)
    plain = run_limited("plain", mpirun + base + [f"--train.out_dir={work}/plain"], limit, env)
    tier = run_limited("nvme", mpirun + base + [f"--train.out_dir={work}/nvme", "--parallel.offload_optimizer=true",
                                                 "--parallel.offload_optimizer_device=nvme",
                                                 f"--parallel.nvme_path={a.nvme_path}",
                                                 f"--parallel.nvme_buffer_count={a.buffers}",
                                                 f"--parallel.nvme_queue_depth={a.queue_depth}"], limit, env)
    fio_after = fio_probe(a.nvme_path, a.fio_mib, a.queue_depth)
    rate = {k: (fio_before[k] + fio_after[k]) / 2 for k in fio_before}
    steps = []
    metrics = os.path.join(work, "nvme", "metrics.jsonl")
    if os.path.exists(metrics):
        for line in open(metrics):
            j = json.loads(line)
            if "nvme" in j:
                steps.append(j)
            if "memory_bytes" in j and "rss" in j["memory_bytes"]:
                tier["rss_bytes_max"] = max(tier.get("rss_bytes_max", 0), j["memory_bytes"]["rss"])
    result = {
        "model": {"layers": L, "embd": C, "intermediate": I, "params": params, "seq": a.seq,
                  "state_bytes_16_per_param": 16 * params, "machine_memory_bytes": machine_memory(),
                  "state_over_machine_memory": 16 * params / machine_memory()},
        "limit_bytes": limit,
        "settings": {"zero_stage": a.zero_stage, "bucket_mb": a.bucket_mb, "nvme_buffer_count": a.buffers,
                     "nvme_queue_depth": a.queue_depth, "ranks": 1,
                     "threads": 2, "dtype": a.dtype},
        "fio": {"before": fio_before, "after": fio_after, "mean": rate, "mib": a.fio_mib,
                "settings": f"bytes/s; 1 MiB sequential read, write and 50/50 rw (both sides summed), io_uring, "
                            f"O_DIRECT, iodepth {a.queue_depth}"},
        "plain": plain,
        "nvme": tier,
    }
    if len(steps) > 1:
        s = steps[1:]
        med = lambda f: statistics.median(f(x) for x in s)
        step_s = med(lambda x: x["step_s"])
        wait_s = med(lambda x: x["nvme"]["wait_s"])
        read = med(lambda x: x["nvme"]["read_bytes"])
        written = med(lambda x: x["nvme"]["written_bytes"])
        opt_s = med(lambda x: x["optimizer_s"])
        moved = read + written
        disk_s = moved / rate["rw"]
        disk_separate_s = read / rate["read"] + written / rate["write"]
        compute_s = step_s - wait_s
        result["nvme_steps"] = {
            "step_s": step_s, "wait_s": wait_s, "compute_s": compute_s, "optimizer_s": opt_s, "read_bytes": read,
            "written_bytes": written, "disk_s": disk_s, "disk_separate_s": disk_separate_s,
            "step_over_bound": step_s / max(compute_s, disk_s),
            "step_over_bound_separate": step_s / max(compute_s, disk_separate_s),
            "io_efficiency": disk_s / step_s, "io_efficiency_separate": disk_separate_s / step_s,
            "io_efficiency_optimizer": disk_s / opt_s, "io_efficiency_optimizer_separate": disk_separate_s / opt_s,
        }
    # The final checkpoint (written streaming from the tier) is whole when its DONE is there.
    done = sorted(d for d in os.listdir(os.path.join(work, "nvme")) if d.startswith("step_")) \
        if os.path.isdir(os.path.join(work, "nvme")) else []
    tier["checkpoint"] = {"dir": done[-1], "done": os.path.exists(os.path.join(work, "nvme", done[-1], "DONE")),
                          "bytes": dir_bytes(os.path.join(work, "nvme", done[-1]))} if done else None
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
