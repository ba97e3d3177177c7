#!/usr/bin/env python3
"""Hierarchical against flat collectives across two hosts with a slow link (issue #25).

Two "hosts" on this machine (network namespaces, tests/support/netns.py), each host's link
limited to --rate-mbit (tc tbf on its eth0, both directions), 2 ranks on each, started with
`trident launch --hostfile`. The same data-parallel run of a ~32M-parameter GPT-2 (8 layers,
width 576, byte vocabulary) with parallel.hierarchical = off (one ring through the 4 ranks) and
= on (reduce-scatter inside each host, all-reduce across, all-gather inside), alternating
--reps times so that a noisy neighbour hits both; per run the median of its steps' wall time
and communication wait (metrics.jsonl's step_s and comm_wait_s, the first step left out), the
fastest step of all runs (the least disturbed by the machine's other work), and
the bytes each host's eth0 sent over the whole run (including the start's broadcast of the
weights). Then one run with auto, to show what it measures and picks. Wall time, because the
link's time is wall time: other processes on the machine slow the compute of both modes alike.

    sudo bench/multihost_bench.py build/apps/trident [--rate-mbit 1000] [--steps 6] [--reps 2]
                                  [--zero-stage 0] [--seq-len 64]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import netns  # noqa: E402
import runlib  # noqa: E402

MODEL = ["--model.n_layer=8", "--model.n_head=8", "--model.n_embd=576", "--model.block_size=64",
         "--model.vocab_size=256", "--data.tokenizer=byte", "--data.batch_size=4", "--train.threads=1",
         "--train.eval_interval=1000000"]
PARAMS = 8 * 12 * 576 * 576 + 256 * 576 + 64 * 576  # blocks + token and position embeddings (about)


def run(trident, hosts, d, mode, steps, env, tag, a):
    out = os.path.join(d, f"run_{tag}")
    args = MODEL + [f"--data.seq_len={a.seq_len}", f"--parallel.zero_stage={a.zero_stage}",f"--data.train_file={d}/data/train.bin", f"--data.val_file={d}/data/val.bin",
                    f"--train.steps={steps}", f"--parallel.hierarchical={mode}", f"--train.out_dir={out}"]
    tx0 = [hosts.tx_bytes(i) for i in range(hosts.n)]
    t0 = time.time()
    p = hosts.run(0, [trident, "launch", "-n", "4", "--hostfile", hosts.hostfile(slots=2), "--", "train"] + args,
                  env=hosts.mpi_env(env), capture_output=True, text=True, errors="replace", timeout=1800)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{mode}: exit {p.returncode}\n{p.stderr[-3000:]}")
    tx = [hosts.tx_bytes(i) - tx0[i] for i in range(hosts.n)]
    with open(os.path.join(out, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    steps_rows = [r for r in rows if "step_s" in r][1:]
    auto_line = next((ln for ln in p.stderr.splitlines() if "hierarchical collectives" in ln), "")
    return {"mode": mode, "step_s": statistics.median(r["step_s"] for r in steps_rows),
            "steps_s": [round(r["step_s"], 3) for r in steps_rows],
            "waits_s": [round(r.get("comm_wait_s", 0.0), 3) for r in steps_rows],
            "comm_wait_s": statistics.median(r.get("comm_wait_s", 0.0) for r in steps_rows),
            "loss": rows[-1].get("loss"), "tx_mb": [round(t / 1e6, 1) for t in tx], "run_s": wall, "auto": auto_line}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trident")
    ap.add_argument("--rate-mbit", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--zero-stage", type=int, default=0, help="0: gradient all-reduce; 1-2: reduce-scatter + all-gather")
    ap.add_argument("--seq-len", type=int, default=64, help="tokens per rank per step (1 sequence each)")
    a = ap.parse_args()
    why = netns.available()
    if why:
        sys.exit(f"multihost_bench: {why}")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    results = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="trident_multihost_bench_") as d:
        runlib.prepare_corpus(a.trident, d, env)
        with netns.Hosts(2, rate_mbit=a.rate_mbit) as hosts:
            for rep in range(a.reps):
                for mode in ("off", "on"):
                    r = run(a.trident, hosts, d, mode, a.steps, env, f"{mode}{rep}", a)
                    results[mode].append(r)
                    print(json.dumps(r), flush=True)
            auto = run(a.trident, hosts, d, "auto", 2, env, "auto", a)
    print(f"\n2 hosts x 2 ranks, each host's link {a.rate_mbit} Mbit/s (tc tbf), GPT-2 of ~{PARAMS / 1e6:.0f}M "
          f"parameters, data parallel, ZeRO stage {a.zero_stage} (fp32 gradients: {4 * PARAMS / 1e6:.0f} MB "
          f"{'all-reduced' if a.zero_stage == 0 else 'reduce-scattered, parameters all-gathered'} per step), "
          f"{a.seq_len} tokens per rank, "
          f"median over {a.reps} runs of each run's median step (wall):")
    print(f"{'collectives':<14}{'step s':>9}{'fastest':>9}{'comm wait s':>13}{'eth0 MB sent per run (h0, h1)':>34}")
    med, fastest = {}, {}
    for mode, name in (("off", "flat ring"), ("on", "hierarchical")):
        rs = results[mode]
        med[mode] = statistics.median(r["step_s"] for r in rs)
        fastest[mode] = min(t for r in rs for t in r["steps_s"])
        print(f"{name:<14}{med[mode]:>9.3f}{fastest[mode]:>9.3f}"
              f"{statistics.median(r['comm_wait_s'] for r in rs):>13.3f}{str(rs[-1]['tx_mb']):>34}")
    print(f"hierarchical / flat step time: {med['on'] / med['off']:.3f} (medians), "
          f"{fastest['on'] / fastest['off']:.3f} (fastest steps)")
    print(f"auto: {auto['auto'] or '(no line)'}")


if __name__ == "__main__":
    main()
