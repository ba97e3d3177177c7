#!/usr/bin/env python3
"""`trident plan` and `trident train --parallel.auto=true` (issue #24):

  - `plan --json` ranks the layouts that fit by tokens/s, each with its memory per category,
    its step time split and the overrides that run it; a model too big for one rank's memory
    (a 1.3B GPT on one 16 GiB device) fits nowhere there and is planned onto a cluster file;
  - bad input is an error naming it: an unknown cluster key, more ranks than the cluster has,
    a negative --tokens; ranks no layout can use (which rule), a model that fits nowhere;
  - --nodes plans that many of a cluster file's nodes, and --ranks past the file's devices
    points at it;
  - each layout's time_parts_s add up to its step, and --explain prints them;
  - a --parallel.* or checkpointing override pins its axis in every ranked layout; --layout
    evaluates the one layout it names, even one the search alone leaves out; a bad word is
    an error naming it;
  - `train --parallel.auto=true` under mpirun -np 2 prints why it chose its layout, runs the
    plan's best layout (its printed config says so) and trains;
  - the NVMe tier: calibrate with --parallel.nvme_path measures the disk into the cluster file
    and leaves nothing there; a plan with the tier and no disk rates is an error naming them;
    --nvme lists the tier's layouts with their disk bytes; parallel.auto on 2 ranks whose memory
    holds no layout without the tier chooses one with it and trains on it.

    cli_plan_test.py TRIDENT MPIEXEC SOURCE_DIR
"""
import array
import json
import os
import re
import shutil
import random
import subprocess
import sys
import tempfile

TINY = ["--model.n_layer=2", "--model.n_embd=64", "--model.n_head=4", "--model.block_size=32", "--model.vocab_size=256",
        "--data.seq_len=32", "--data.batch_size=4", "--data.tokenizer=byte", "--train.threads=1"]


def run(cmd, env):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def nvme_tier(trident, mpiexec, env, scratch, failures):
    tier_dir = os.path.join(scratch, "tier")
    os.makedirs(tier_dir)
    calib = os.path.join(scratch, "calib.toml")
    r = run([trident, "calibrate", "--out", calib, f"--parallel.nvme_path={tier_dir}"] + TINY, env)
    if r.returncode != 0:
        failures.append(f"calibrate --parallel.nvme_path failed: {r.stderr[-1000:]}")
    else:
        rates = {k: float(v.split("#")[0]) for k, v in (line.split(" = ", 1) for line in open(calib).read().splitlines()
                                                        if line.startswith("disk_"))}
        if not (rates.get("disk_read_gbs", 0) > 0 and rates.get("disk_write_gbs", 0) > 0):
            failures.append(f"calibrate --parallel.nvme_path wrote no disk rates: {rates}")
        if os.listdir(tier_dir):
            failures.append(f"calibrate left files under parallel.nvme_path: {os.listdir(tier_dir)}")
    # Units of 2621 elements: many more than the 4 staging buffers of TINY's state.
    tier = TINY + ["--parallel.nvme_buffer_mb=0.01"]
    r = run([trident, "plan", "--ranks", "2", "--parallel.offload_optimizer_device=nvme"] + tier, env)
    if r.returncode == 0 or "disk_read_gbs" not in r.stderr or "trident calibrate" not in r.stderr:
        failures.append(f"a plan with the tier and no disk rates should name them: {r.stderr[-600:]}")
    cpu = os.path.join(scratch, "cpu_disk.toml")

    def write_cluster(memory_gib):
        with open(cpu, "w") as f:
            f.write('[cluster]\nname = "2 CPU ranks and a disk"\ndevices_per_node = 2\ndisk_read_gbs = 1.0\n'
                    f'disk_write_gbs = 2.0\n[device]\nmemory_gib = {memory_gib}\n')
    write_cluster(16.0)
    r = run([trident, "plan", "--cluster", cpu, "--nvme", "--json", "--top", "10000"] + tier, env)
    if r.returncode != 0:
        failures.append(f"plan --nvme failed: {r.stderr[-600:]}")
        return
    ranked = json.loads(r.stdout)["ranked"]
    tiered = [c for c in ranked if c["layout"]["offload_device"] == "nvme"]
    if not tiered or any("+nvme" not in c["name"] or not c["layout"]["offload"] or c["disk_bytes"]["written"] <= 0
                         or c["disk_bytes"]["read"] != c["disk_bytes"]["written"] for c in tiered):
        failures.append(f"plan --nvme should list the tier's layouts with their disk bytes: {[c['name'] for c in ranked]}")
        return
    # A memory between the smallest layout on the tier and the smallest without it.
    with_tier = min(c["memory_bytes"]["total"] for c in tiered)
    without = min(c["memory_bytes"]["total"] for c in ranked if c["layout"]["offload_device"] != "nvme")
    if not with_tier < without:
        failures.append(f"the tier should take memory off the smallest layout: {with_tier} vs {without}")
        return
    write_cluster((with_tier + without) / 2 / 2**30)
    with tempfile.TemporaryDirectory(prefix="trident_cli_plan_nvme_") as d:
        tokens = array.array("H", [random.Random(2).randrange(256) for _ in range(4096)])
        train_bin = os.path.join(d, "train.bin")
        with open(train_bin, "wb") as f:
            tokens.tofile(f)
        r = run([mpiexec, "-np", "2", "--oversubscribe", trident, "train", "--parallel.auto=true",
                 f"--parallel.auto_cluster={cpu}", "--parallel.offload_optimizer_device=nvme",
                 f"--parallel.nvme_path={tier_dir}", f"--data.train_file={train_bin}", "--data.val_file=",
                 f"--train.out_dir={d}/run", "--train.steps=2", "--train.checkpoint_interval=0"] + tier, env)
        if r.returncode != 0 or "without the NVMe tier" not in r.stderr or \
                'offload_optimizer_device = "nvme"' not in r.stdout:
            failures.append(f"parallel.auto with too little memory should choose the tier: {r.stdout[-400:]} "
                            f"{r.stderr[-1500:]}")
        elif '"nvme": {"read_bytes"' not in open(os.path.join(d, "run", "metrics.jsonl")).read():
            failures.append("the tier's run wrote no nvme traffic into metrics.jsonl")


def main():
    trident, mpiexec, source = sys.argv[1], sys.argv[2], sys.argv[3]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    failures = []
    a100 = os.path.join(source, "configs/clusters/dgx-a100-80gb.toml")

    r = run([trident, "plan", "--ranks", "2", "--json", "--top", "100"] + TINY, env)
    if r.returncode != 0:
        failures.append(f"plan --json failed: {r.stderr}")
    else:
        plan = json.loads(r.stdout)
        ranked = plan["ranked"]
        fits = [c for c in ranked if c["fits"]]
        if not fits or [c["tokens_per_s"] for c in fits] != sorted([c["tokens_per_s"] for c in fits], reverse=True):
            failures.append("plan --json: the fitting layouts are not ranked by tokens/s")
        for c in ranked:
            mem = c["memory_bytes"]
            if mem["total"] != sum(v for k, v in mem.items() if k != "total"):
                failures.append(f"{c['name']}: total is not the sum of the categories")
            t = c["time_s"]
            if abs(t["step"] - (t["compute"] + t["exposed_comm"] + t["bubble"] + t["exposed_disk"])) > 1e-9 * t["step"]:
                failures.append(f"{c['name']}: step time is not compute + exposed comm + bubble + exposed disk")
            if not any(o.startswith("--parallel.tp=") for o in c["overrides"]):
                failures.append(f"{c['name']}: no overrides")
            # The step by part (plan --explain's rows) adds up to it.
            parts = c["time_parts_s"]
            if abs(sum(parts.values()) - t["step"]) > 1e-9 * t["step"] or min(parts.values()) < 0:
                failures.append(f"{c['name']}: time_parts_s {parts} do not add up to the step {t['step']}")

    # Pinned axes (issue #53): an override pins its axis, --layout pins its words and names the
    # ranks; a bad word is an error naming it.
    r = run([trident, "plan", "--ranks", "4", "--json", "--top", "1000", "--parallel.tp=2",
             "--model.activation_checkpointing=full"] + TINY, env)
    if r.returncode != 0:
        failures.append(f"plan --parallel.tp=2 failed: {r.stderr}")
    else:
        plan = json.loads(r.stdout)
        if plan["pinned"] != "tp2 ckpt=full" or not plan["ranked"] or any(
                c["layout"]["tp"] != 2 or c["layout"]["activation_checkpointing"] != "full" for c in plan["ranked"]):
            failures.append(f"plan --parallel.tp=2: pinned {plan['pinned']!r}, layouts "
                            f"{[c['name'] for c in plan['ranked']]}")
    pinned = "dp1 tp1 pp1 zero1 ckpt=selective b4 m1"  # ZeRO on one rank: the search alone leaves it out
    r = run([trident, "plan", "--layout", pinned] + TINY, env)
    if r.returncode != 0 or f"1    {pinned} " not in r.stdout or "1 layouts, 1 evaluated" not in r.stdout:
        failures.append(f"plan --layout '{pinned}' did not print that one layout: {r.stdout} {r.stderr}")
    # --explain: the pinned layout's step by part, each with its share, adding up to its step.
    r = run([trident, "plan", "--layout", pinned, "--explain"] + TINY, env)
    lines = r.stdout.split(f"step of {pinned} by part")[-1].splitlines()[1:]
    rows = [re.match(r"^  (.+?)\s+([0-9.]+) s(\s+[0-9.]+%)?$", l) for l in lines]
    seconds = {m.group(1): float(m.group(2)) for m in rows if m}
    step = seconds.pop("step", None)
    if (r.returncode != 0 or step is None or abs(sum(seconds.values()) - step) > 1e-3 or
            not any(k.startswith("head products") for k in seconds) or
            not any(k.startswith("optimizer") for k in seconds)):
        failures.append(f"plan --layout '{pinned}' --explain: no breakdown adding up to the step: {r.stdout} {r.stderr}")
    r = run([trident, "plan", "--layout", "dp2 tp2 ppx"] + TINY, env)
    if r.returncode == 0 or "'ppx' needs a whole number" not in r.stderr:
        failures.append(f"plan --layout 'dp2 tp2 ppx' was not refused naming the word: {r.stderr}")

    # The JSON names every layout the search evaluated, whatever --top details, and what the
    # prediction assumes where frameworks differ; --comm-overlap and bf16 gradients change the
    # data-parallel time as they say (issue #53).
    base = [trident, "plan", "--cluster", a100, "--nodes", "2", "--json"] + TINY + ["--data.batch_size=16"]
    r = run(base + ["--top", "1"], env)
    if r.returncode != 0:
        failures.append(f"plan --nodes 2 --json failed: {r.stderr}")
    else:
        plan = json.loads(r.stdout)
        if len(plan["evaluated_layouts"]) != plan["evaluated"] or len(plan["ranked"]) != 1:
            failures.append(f"plan --json: {len(plan['evaluated_layouts'])} evaluated_layouts for "
                            f"{plan['evaluated']} evaluated")
        elif plan["evaluated_layouts"][0] != plan["ranked"][0]["name"]:
            failures.append("plan --json: evaluated_layouts does not start with the best")
        if plan["assumes"] != {"convention": "trident", "gradient_buffers": "fp32", "gradient_communication": "fp32",
                               "overlapped_reduction_zero_stages": "0,1,2,3", "overlapped_zero3_gathers": True,
                               "comm_overlap": 0.9, "reduces_every_micro_batch_zero_stages": "2,3",
                               "pipeline_scatter_gather": False, "allocator_headroom": 0.05,
                               "collectives": "ring inside a node, hierarchical across nodes", "attention": "flash",
                               "zero3_compute_shard": True, "zero3_backward_prefetch": "before the gradients",
                               "sharded_gradient_passes": "trident"}:
            failures.append(f"plan --json: assumes {plan['assumes']}")
    # 50M parameters: bandwidth, not latency, and several buckets to overlap.
    mid = [trident, "plan", "--cluster", a100, "--nodes", "2", "--json", "--model.n_layer=4", "--model.n_embd=1024",
           "--model.n_head=16", "--model.block_size=256", "--model.vocab_size=4096", "--data.seq_len=256",
           "--data.batch_size=16", "--data.tokenizer=byte", "--layout", "dp16 tp1 pp1 zero0 ckpt=none b1 m1",
           "--top", "1"]
    times = {}
    for name, extra in {"plain": ["--comm-overlap", "0"], "overlap": ["--comm-overlap", "1"],
                        "bf16": ["--comm-overlap", "0", "--parallel.grad_compression=bf16"],
                        "megatron": ["--convention", "megatron"]}.items():
        r = run(mid + extra, env)
        if r.returncode != 0:
            failures.append(f"plan {name}: {r.stderr}")
            continue
        c = json.loads(r.stdout)
        times[name] = c["ranked"][0]["time_s"]
        if name == "bf16" and c["assumes"]["gradient_communication"] != "16-bit":
            failures.append(f"plan with bf16 gradients assumes {c['assumes']}")
        if name == "megatron" and times[name]["exposed_comm"] != times[name]["comm_total"]:
            failures.append(f"plan --convention megatron (no overlap_grad_reduce) hid traffic: {times[name]}")
    if len(times) == 4:
        if abs(times["bf16"]["comm_total"] - 0.5 * times["plain"]["comm_total"]) > 0.05 * times["plain"]["comm_total"]:
            failures.append(f"bf16 gradients: comm {times['bf16']['comm_total']} against fp32's {times['plain']['comm_total']}")
        if not times["overlap"]["exposed_comm"] < times["plain"]["exposed_comm"]:
            failures.append(f"--comm-overlap 1 hid nothing: {times['overlap']} against {times['plain']}")
    # A framework's gradient buffers: DeepSpeed's bf16 ones are half the trainer's fp32 ones.
    grads = {}
    for conv in ["trident", "deepspeed"]:
        r = run(mid + ["--precision.dtype=bf16", "--convention", conv], env)
        if r.returncode != 0:
            failures.append(f"plan --convention {conv}: {r.stderr}")
            continue
        grads[conv] = json.loads(r.stdout)["ranked"][0]["memory_bytes"]["gradient"]
    if len(grads) == 2 and abs(grads["deepspeed"] - grads["trident"] / 2) > 1:
        failures.append(f"--convention deepspeed's bf16 gradients: {grads}")
    # Composer's FSDP1 gathers the backward's parameters after each part's gradients: the same
    # ZeRO-3 traffic as fsdp's, more of it exposed (Note [Gathers after the gradients]).
    zero3 = {}
    for conv in ["fsdp", "composer"]:
        # Sixteen sequences a rank: compute enough to hide fsdp's gathers behind.
        args = [a for a in mid[:-4] if not a.startswith("--data.batch_size=")]
        r = run(args + ["--data.batch_size=256", "--layout", "dp16 tp1 pp1 zero3 ckpt=none b16 m1", "--top", "1",
                        "--precision.dtype=bf16", "--convention", conv], env)
        if r.returncode != 0:
            failures.append(f"plan --convention {conv} zero3: {r.stderr}")
            continue
        c = json.loads(r.stdout)
        zero3[conv] = (c["ranked"][0]["time_s"], c["assumes"]["zero3_backward_prefetch"])
        # Note [Gradient passes a micro-batch]: FSDP1's or FSDP2's.
        if c["assumes"].get("sharded_gradient_passes") != {"fsdp": "fsdp2", "composer": "fsdp1"}[conv]:
            failures.append(f"plan --convention {conv}: assumes {c['assumes']}")
    if len(zero3) == 2:
        (f_time, f_prefetch), (c_time, c_prefetch) = zero3["fsdp"], zero3["composer"]
        if (abs(c_time["comm_total"] - f_time["comm_total"]) > 1e-9 or not c_time["exposed_comm"] > f_time["exposed_comm"]
                or (f_prefetch, c_prefetch) != ("before the gradients", "after the gradients")):
            failures.append(f"--convention composer against fsdp under ZeRO-3: {zero3}")
    r = run(mid + ["--convention", "jax"], env)
    if r.returncode == 0 or "'jax'" not in r.stderr or "megatron, fsdp, composer, deepspeed" not in r.stderr:
        failures.append(f"plan --convention jax was not refused naming the allowed ones: {r.stderr}")
    # An unfused attention's scores go through memory: the same layout is slower, and says so.
    long_seq = mid[:]
    for i, arg in enumerate(long_seq):
        if arg.startswith(("--model.block_size=", "--data.seq_len=")):
            long_seq[i] = arg.split("=")[0] + "=4096"
    computes = {}
    for kernel in ["flash", "unfused"]:
        r = run(long_seq + ["--precision.dtype=bf16", "--attention", kernel], env)
        if r.returncode != 0:
            failures.append(f"plan --attention {kernel}: {r.stderr}")
            continue
        c = json.loads(r.stdout)
        computes[kernel] = c["ranked"][0]["time_s"]["compute"]
        if c["assumes"]["attention"] != kernel:
            failures.append(f"plan --attention {kernel} assumes {c['assumes']}")
    if len(computes) == 2 and not computes["unfused"] > 1.05 * computes["flash"]:
        failures.append(f"--attention unfused at T=4096 not slower than flash: {computes}")
    r = run(mid + ["--attention", "naive"], env)
    if r.returncode == 0 or "naive" not in r.stderr:
        failures.append(f"plan --attention naive was not refused naming the value: {r.stderr}")
    r = run([trident, "plan", "--ranks", "2", "--parallel.grad_compression=powersgd", "--top", "1"] + TINY, env)
    if r.returncode != 0 or "priced uncompressed" not in r.stderr:
        failures.append(f"plan with powersgd did not say it prices it uncompressed: {r.stderr}")

    # --nodes plans that many of a cluster file's nodes; --ranks past the file's devices says so.
    h100 = os.path.join(source, "configs/clusters/dgx-h100-80gb.toml")
    r = run([trident, "plan", "--cluster", h100, "--nodes", "2", "--json", "--top", "1"] + TINY +
            ["--data.batch_size=16"], env)
    if r.returncode != 0 or json.loads(r.stdout)["ranks"] != 16:
        failures.append(f"plan --nodes 2 did not plan 16 ranks: {r.stdout[:300]} {r.stderr}")
    r = run([trident, "plan", "--cluster", h100, "--ranks", "1024"] + TINY, env)
    if r.returncode == 0 or "--nodes 128 plans that many of its nodes" not in r.stderr:
        failures.append(f"plan --ranks 1024 on 32 nodes did not point at --nodes: {r.stderr}")

    # 1.3B parameters: 16 bytes each of model state alone is 21 GB.
    big = ["--model.n_layer=24", "--model.n_embd=2048", "--model.n_head=16", "--model.block_size=2048",
           "--data.seq_len=2048", "--data.batch_size=8", "--precision.dtype=bf16"]
    scratch = tempfile.mkdtemp(prefix="trident_cli_plan_")  # this run's cluster files
    small_device = os.path.join(scratch, "small_device.toml")
    with open(small_device, "w") as f:
        f.write("[cluster]\nname = \"one 16 GiB device\"\n[device]\nmemory_gib = 16.0\n")
    r = run([trident, "plan", "--cluster", small_device, "--json"] + big, env)
    if r.returncode != 0 or any(c["fits"] for c in json.loads(r.stdout)["ranked"]):
        failures.append(f"a 1.3B model should fit no layout of one 16 GiB device: {r.stdout[:300]} {r.stderr}")
    r = run([trident, "plan", "--cluster", small_device] + big, env)
    if r.returncode != 0 or "no layout fits 16 GiB per device on 1 rank(s)" not in r.stdout:
        failures.append(f"the table should say no layout fits one 16 GiB device: {r.stdout[-400:]} {r.stderr}")
    # --parallel.auto on one 16 GiB GPU: nothing fits without ZeRO-Offload, so it chooses among
    # the offloaded layouts and says so; with too little host memory for them, it names that.
    gpu16 = os.path.join(scratch, "gpu16.toml")
    for host_gib, want_fit in ((64.0, True), (8.0, False)):
        with open(gpu16, "w") as f:
            f.write(f'[cluster]\nname = "one 16 GiB GPU"\nhost_memory_gib = {host_gib}\n'
                    '[device]\nkind = "gpu"\nmemory_gib = 16.0\n')
        r = run([trident, "plan", "--cluster", gpu16] + big, env)
        if r.returncode != 0 or "--offload lists ZeRO-Offload's layouts" not in r.stdout:
            failures.append(f"plan on one 16 GiB GPU should point to --offload: {r.stdout[-400:]} {r.stderr}")
        r = run([trident, "train", "--parallel.auto=true", f"--parallel.auto_cluster={gpu16}", "--print-config"] + big, env)
        if want_fit and (r.returncode != 0 or "without ZeRO-Offload" not in r.stderr or
                         "\noffload_optimizer = true" not in r.stdout):
            failures.append(f"parallel.auto on one 16 GiB GPU should choose ZeRO-Offload: {r.stdout[-300:]} {r.stderr[-600:]}")
        if not want_fit and (r.returncode == 0 or "host_memory_gib = 8" not in r.stderr or
                             "ZeRO-Offload's layouts too" not in r.stderr):
            failures.append(f"parallel.auto with 8 GiB of host memory should name it: {r.stderr[-600:]}")
    # 7 ranks and 4 sequences, 4 heads, 2 layers: no layout exists at all; say why, not "none fits".
    r = run([trident, "plan", "--ranks", "7"] + TINY, env)
    if r.returncode != 0 or "no layout of 7 rank(s) exists for this run" not in r.stdout or \
            "dividing the 4 sequences" not in r.stdout:
        failures.append(f"7 ranks: the table should say no layout exists and why: {r.stdout[-400:]} {r.stderr}")
    r = run([trident, "plan", "--cluster", a100, "--ranks", "16", "--json"] + big, env)
    if r.returncode != 0 or not json.loads(r.stdout)["ranked"][0]["fits"]:
        failures.append(f"a 1.3B model should fit 16 A100s: {r.stderr}")

    bad = os.path.join(scratch, "bad.toml")
    with open(bad, "w") as f:
        f.write("[device]\nmemory_gb = 80\n")
    r = run([trident, "plan", "--cluster", bad] + TINY, env)
    if r.returncode == 0 or "memory_gb" not in r.stderr or "memory_gib" not in r.stderr:
        failures.append(f"a bad cluster key should be named with its correction: {r.stderr}")
    r = run([trident, "plan", "--cluster", a100, "--ranks", "4096"] + TINY, env)
    if r.returncode == 0 or "4096" not in r.stderr or "3072" not in r.stderr:
        failures.append(f"more ranks than the cluster's devices should be an error naming both: {r.stderr}")
    # A negative count names the flag, the value and what is allowed (not CLI11's range up to
    # the largest double, printed in 300 digits).
    r = run([trident, "plan", "--tokens", "-5", "--price-per-device-hour", "2"] + TINY, env)
    if r.returncode == 0 or "--tokens: Value -5 is not allowed: must be > 0" not in r.stderr or len(r.stderr) > 300:
        failures.append(f"--tokens -5 should be an error saying what is allowed: {r.stderr[:500]}")

    with tempfile.TemporaryDirectory(prefix="trident_cli_plan_test_") as d:
        tokens = array.array("H", [random.Random(1).randrange(256) for _ in range(4096)])
        train_bin = os.path.join(d, "train.bin")
        with open(train_bin, "wb") as f:
            tokens.tofile(f)
        common = TINY + [f"--data.train_file={train_bin}", "--data.val_file=", f"--train.out_dir={d}/run",
                         "--train.steps=2", "--train.checkpoint_interval=0"]
        expected = json.loads(run([trident, "plan", "--ranks", "2", "--json", "--top", "1"] + TINY, env).stdout)
        best = expected["ranked"][0]["layout"]
        r = run([mpiexec, "-np", "2", "--oversubscribe", trident, "train", "--parallel.auto=true"] + common, env)
        if r.returncode != 0:
            failures.append(f"train --parallel.auto failed: {r.stderr[-2000:]}")
        else:
            if "parallel.auto: " not in r.stderr or "predicted" not in r.stderr:
                failures.append(f"train --parallel.auto should print why: {r.stderr[-1000:]}")
            printed = r.stdout
            for key, value in [("tp", best["tp"]), ("pp", best["pp"]), ("zero_stage", best["zero_stage"])]:
                if f"\n{key} = {value}" not in printed:
                    failures.append(f"the run's config should have parallel.{key} = {value} (the plan's best)")
            if f'activation_checkpointing = "{best["activation_checkpointing"]}"' not in printed:
                failures.append("the run's config should have the plan's activation checkpointing")
            if not os.path.exists(os.path.join(d, "run", "metrics.jsonl")):
                failures.append("train --parallel.auto wrote no metrics")
    nvme_tier(trident, mpiexec, env, scratch, failures)
    # calibrate --out over its own --config replaced the training config with a cluster file.
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "run.toml")
        with open(cfg, "w") as f:
            f.write("[model]\nn_layer = 2\n")
        for out in (cfg, os.path.join(d, ".", "run.toml")):
            r = run([trident, "calibrate", "--config", cfg, "--out", out], env)
            if r.returncode == 0 or "is the --config file it reads" not in r.stderr:
                failures.append(f"calibrate --out {out} over its --config should be refused: {r.returncode} {r.stderr[-500:]}")
        with open(cfg) as f:
            if f.read() != "[model]\nn_layer = 2\n":
                failures.append("calibrate --out over its --config changed the config")
    shutil.rmtree(scratch, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
