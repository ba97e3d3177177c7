#!/usr/bin/env python3
"""Training across two "hosts" (network namespaces joined by veth links to a bridge, made by
tests/support/netns.py; OpenMPI reaches the second through tests/support/netns_rsh.sh in
place of ssh), 2 ranks on each:

1. `mpirun --hostfile` (data parallel, ZeRO-2, hierarchical collectives) and `trident launch
   --hostfile` (tp2 x dp2, hierarchical = auto)
   log the one-process run's per-step losses (within 1e-5 relative), write their checkpoint
   into a directory both hosts see, and it loads in one process;
2. hierarchical collectives (parallel.hierarchical = on) give the flat ring's losses within
   1e-5 relative, and the bytes each host sends to the other per step, from the
   communicators' counters, match its eth0's own counter (within the TCP/IP headers) and are
   those of Note [Hierarchical collectives]: 2/3 of the flat ring's on 2 hosts x 2 ranks;
3. a cut link (h1's eth0 down mid-run) ends every rank within the collective timeout, each
   naming the operation, and the peer host where the rank's own peer is across the link; and
   mpirun ends, with a failure status, within a minute.

Needs root and iproute2; exits 77 (skipped) with the reason otherwise.

    multihost_test.py TRIDENT MULTIHOST_PROBE
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import netns  # noqa: E402
import runlib  # noqa: E402

TIMEOUT_S = 8  # the collective timeout of the cut-link run (TRIDENT_COMM_TIMEOUT_S)


def close(a, b, rel=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= rel * abs(y) for x, y in zip(a, b))


def rank_pids(hosts):
    """pids of the `trident train` ranks (not launch) in the hosts' namespaces."""
    pids = []
    for i in range(hosts.n):
        out = subprocess.run(["ip", "netns", "pids", hosts.ns(i)], capture_output=True, text=True).stdout.split()
        for pid in out:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if len(argv) > 1 and argv[1] == b"train" and os.path.basename(argv[0]).startswith(b"trident"):
                pids.append(int(pid))
    return pids


def steps_logged(run):
    return len(runlib.metrics(run)[0])


def check_layouts(trident, hosts, d, env, failures):
    """1: the CLI on two hosts against one process."""
    args = runlib.tiny_args(d, n_embd=32, seq_len=32, batch_size=8) + [
        "--data.sampler=sequential", "--train.steps=8", "--train.eval_interval=4", "--train.eval_batches=2"]
    ref = os.path.join(d, "one")
    p = subprocess.run([trident, "train"] + args + [f"--train.out_dir={ref}"], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        failures.append(f"one process: exit {p.returncode}\n{p.stderr[-2000:]}")
        return
    ref_train, ref_val = runlib.metrics(ref)
    hostfile = hosts.hostfile(slots=2)
    menv = hosts.mpi_env(env)
    runs = {
        "mpirun --hostfile, ZeRO-2, hierarchical": ["mpirun", "--hostfile", hostfile, "-np", "4", "--bind-to", "none",
                                                    "-x", "OMP_NUM_THREADS", trident, "train"] + args
        + ["--parallel.zero_stage=2", "--parallel.hierarchical=on"],
        "trident launch --hostfile, tp2 x dp2": [trident, "launch", "-n", "4", "--hostfile", hostfile, "--", "train"]
        + args + ["--parallel.tp=2"],
    }
    for i, (what, argv) in enumerate(runs.items()):
        run = os.path.join(d, f"layout{i}")
        t0 = time.time()
        p = hosts.run(0, argv + [f"--train.out_dir={run}"], env=menv, capture_output=True, text=True,
                      errors="replace", timeout=400)
        if p.returncode != 0:
            failures.append(f"{what}: exit {p.returncode}\n{p.stderr[-3000:]}")
            continue
        # Both hosts took part: the world's host layout is in its hierarchical-collectives line.
        if "for the communicator of 4 ranks on h0 (ranks 0-1), h1 (ranks 2-3)" not in p.stderr:
            failures.append(f"{what}: the run does not report ranks on h0 and h1:\n{p.stderr[-2000:]}")
        tr, va = runlib.metrics(run)
        for kind, a, b in (("train", tr, ref_train), ("val", va, ref_val)):
            if not close(a, b):
                failures.append(f"{what}: {kind} losses {a} differ from one process's {b}")
        ckpt = os.path.join(run, "step_000008")
        files = sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else []
        if not files:
            failures.append(f"{what}: no checkpoint in {ckpt}")
            continue
        # Who writes (Note [Checkpoints from placements]): under ZeRO every rank its partition;
        # under tp2 x dp2 the first data-parallel replica's two tensor-parallel ranks.
        rank_files = {f.split(".rank")[1][:5] for f in files if ".rank" in f}
        writers = {"00000", "00001", "00002", "00003"} if "ZeRO" in what else {"00000", "00001"}
        if rank_files != writers:
            failures.append(f"{what}: the checkpoint's rank files are not from ranks {sorted(writers)}: {files}")
        e = subprocess.run([trident, "eval", "--batches", "1", "--checkpoint", ckpt], env=env, capture_output=True,
                           text=True, errors="replace", timeout=120)
        if e.returncode != 0:
            failures.append(f"{what}: its checkpoint does not load in one process: exit {e.returncode}\n{e.stderr[-2000:]}")
        print(f"multihost: {what}: {len(tr)} steps in {time.time() - t0:.1f} s, final loss {tr[-1]:.6f} "
              f"(one process {ref_train[-1]:.6f}), checkpoint {len(files)} files: ok", flush=True)


def probe(hosts, probe_bin, d, prefix, zero, hier, env, failures, steps=12):
    p = hosts.run(0, ["mpirun", "--hostfile", hosts.hostfile(slots=2), "-np", "4", "--bind-to", "none", "-x",
                      "OMP_NUM_THREADS", probe_bin, d, prefix, str(steps), str(zero), hier, "64"],
                  env=hosts.mpi_env(env), capture_output=True, text=True, errors="replace", timeout=400)
    if p.returncode != 0:
        failures.append(f"probe {prefix}: exit {p.returncode}\n{p.stderr[-3000:]}")
        return None
    ranks = []
    for r in range(4):
        with open(os.path.join(d, f"{prefix}_rank{r}.json")) as f:
            ranks.append(json.load(f))
    return ranks


def per_step_across(ranks, first=2):
    """Per host: (bytes its ranks sent across hosts per step by the counters, its eth0's tx per
    step), over steps first..last (the first steps warm up)."""
    out = {}
    steps = len(ranks[0]["losses"]) - first
    for host in sorted({r["host"] for r in ranks}):
        mine = [r for r in ranks if r["host"] == host]
        counted = sum(r["inter"][-1] - r["inter"][first - 1] for r in mine) / steps
        veth = (mine[0]["tx"][-1] - mine[0]["tx"][first - 1]) / steps
        out[host] = (counted, veth)
    return out


def check_hierarchical(hosts, probe_bin, d, env, failures):
    """2: hierarchical against flat: losses, and bytes across hosts by counters and by veth."""
    for zero in (0, 2):
        flat = probe(hosts, probe_bin, d, f"flat{zero}", zero, "off", env, failures)
        hier = probe(hosts, probe_bin, d, f"hier{zero}", zero, "on", env, failures)
        if flat is None or hier is None:
            continue
        what = "all-reduce (data parallel)" if zero == 0 else "reduce-scatter + all-gather (ZeRO-2)"
        if not hier[0]["hierarchical"] or flat[0]["hierarchical"]:
            failures.append(f"{what}: hierarchical on/off not in effect ({hier[0]['hierarchical']}, {flat[0]['hierarchical']})")
        if not close(hier[0]["losses"], flat[0]["losses"]):
            failures.append(f"{what}: hierarchical losses {hier[0]['losses']} differ from flat {flat[0]['losses']}")
        for r in flat + hier:  # the metrics registry publishes the counters (as of a step's end)
            if not (r["inter"][-2] <= r["published"][1] <= r["inter"][-1] and
                    r["intra"][-2] <= r["published"][0] <= r["intra"][-1]):
                failures.append(f"{what}: rank {r['rank']} published {r['published']} (intra, inter) in the "
                                f"metrics registry; its last steps' counters: {r['intra'][-2:]}, {r['inter'][-2:]}")
        f, h = per_step_across(flat), per_step_across(hier)
        for name, run in (("flat", f), ("hierarchical", h)):
            for host, (counted, veth) in run.items():
                # The link also carries TCP/IP headers, acknowledgements and MPI's own headers.
                if not (counted > 0 and 1.0 <= veth / counted <= 1.1):
                    failures.append(f"{what}, {name}: {host} sent {veth:.0f} bytes/step by its eth0 counter, "
                                    f"{counted:.0f} by the communicators' counters")
        ratio = sum(c for c, _ in h.values()) / sum(c for c, _ in f.values())
        veth_ratio = sum(v for _, v in h.values()) / sum(v for _, v in f.values())
        # 2 hosts x 2 ranks: 2 N against 3 N (Note [Hierarchical collectives]); the step's small
        # all-reduces (loss, stop signals) move the ratio a little.
        if not 0.6 <= ratio <= 0.72:
            failures.append(f"{what}: hierarchical / flat bytes across hosts = {ratio:.3f}, expected about 2/3")
        print(f"multihost: {what}: bytes across hosts per step, flat: "
              + ", ".join(f"{k} {c:.0f} (eth0 {v:.0f})" for k, (c, v) in f.items()) + "; hierarchical: "
              + ", ".join(f"{k} {c:.0f} (eth0 {v:.0f})" for k, (c, v) in h.items())
              + f"; hierarchical / flat {ratio:.3f} by counters, {veth_ratio:.3f} by eth0; losses equal within 1e-5",
              flush=True)


def check_cut_link(trident, hosts, d, env, failures):
    """3: h1's link goes down mid-run; every rank must end within the timeout, naming the operation."""
    run, logs = os.path.join(d, "cut"), os.path.join(d, "cut_logs")
    args = runlib.tiny_args(d, n_embd=32, seq_len=32, batch_size=8) + [
        "--train.steps=100000", "--train.eval_interval=100000", "--parallel.zero_stage=2", f"--train.out_dir={run}"]
    # mpirun itself (trident launch passes no mpirun options): --output-filename has each
    # host's daemon write its ranks' output to the shared disk, so h1's ranks' last words are
    # seen although their host is cut off.
    menv = hosts.mpi_env(dict(env, TRIDENT_COMM_TIMEOUT_S=str(TIMEOUT_S)))
    with open(os.path.join(d, "cut_mpirun.log"), "w+") as out:
        mpirun = hosts.popen(0, ["mpirun", "--hostfile", hosts.hostfile(slots=2), "-np", "4", "--bind-to", "none",
                                 "--output-filename", logs, "-x", "OMP_NUM_THREADS", "-x", "TRIDENT_COMM_TIMEOUT_S",
                                 trident, "train"] + args, env=menv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 240
        while steps_logged(run) < 5 and time.time() < deadline and mpirun.poll() is None:
            time.sleep(0.2)
        if steps_logged(run) < 5:
            mpirun.kill()
            out.seek(0)
            failures.append(f"cut link: the run did not reach step 5: {out.read()[-3000:]}")
            return
        ranks_before = rank_pids(hosts)
        hosts.cut(1)
        cut_at = time.time()
        while rank_pids(hosts) and time.time() - cut_at < TIMEOUT_S + 60:
            time.sleep(0.2)
        ended_after = time.time() - cut_at
        left = rank_pids(hosts)
        try:
            mpirun.wait(timeout=60)
            mpirun_note = f"mpirun exited {mpirun.returncode} {time.time() - cut_at:.1f} s after the cut"
        except subprocess.TimeoutExpired:
            mpirun_note = "mpirun had not exited 60 s after the cut (killed)"
            mpirun.kill()
            failures.append(f"cut link: {mpirun_note}")
        if mpirun.returncode == 0:
            failures.append("cut link: mpirun exited 0 (success) for a job whose link was cut")
    if len(ranks_before) != 4:
        failures.append(f"cut link: expected 4 rank processes before the cut, found {ranks_before}")
    if left or ended_after > TIMEOUT_S + 15:
        failures.append(f"cut link: ranks {left} still running {ended_after:.1f} s after the cut "
                        f"(timeout {TIMEOUT_S} s)")
    texts = {}
    for r in range(4):
        paths = glob.glob(os.path.join(logs, "**", f"rank.{r}", "stderr"), recursive=True)
        texts[r] = "".join(open(p, errors="replace").read() for p in paths)
    named_peer_host = 0
    for r, text in texts.items():
        lines = [ln for ln in text.splitlines() if f"trident (rank {r})" in ln and "did not complete within" in ln]
        if not lines:
            failures.append(f"cut link: rank {r} left no timeout message naming its operation; its stderr:\n"
                            f"{text[-1500:]}")
            continue
        line = lines[0]
        if not any(op in line for op in ("all_reduce", "reduce_scatter", "all_gather", "broadcast")):
            failures.append(f"cut link: rank {r}'s message names no operation: {line}")
        if f"on host {'h1' if r < 2 else 'h0'}" in line:
            named_peer_host += 1
    # A rank whose ring peer is across the link names that host; one waiting on a peer of its
    # own host names that peer, and the hosts the communicator spans.
    if named_peer_host < 2:
        failures.append(f"cut link: {named_peer_host} ranks named a peer on the other host; messages:\n"
                        + "\n".join(t[-600:] for t in texts.values()))
    print(f"multihost: cut link: every rank ended {ended_after:.1f} s after the cut (timeout {TIMEOUT_S} s), "
          f"{named_peer_host} naming a peer on the other host; {mpirun_note}", flush=True)
    for r, text in texts.items():
        for ln in text.splitlines():
            if "did not complete within" in ln:
                print(f"  rank {r}: {ln[:400]}")
                break


def main():
    trident, probe_bin = sys.argv[1], sys.argv[2]
    why = netns.available()
    if why:
        print(f"multihost: skipped: {why}")
        sys.exit(77)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures = []
    only = os.environ.get("MULTIHOST_ONLY", "layouts,hierarchical,cut").split(",")
    with tempfile.TemporaryDirectory(prefix="trident_multihost_") as d:
        runlib.prepare_corpus(trident, d, env)
        with netns.Hosts(2) as hosts:
            if "layouts" in only:
                check_layouts(trident, hosts, d, env, failures)
            if "hierarchical" in only:
                check_hierarchical(hosts, probe_bin, d, env, failures)
            if "cut" in only:
                check_cut_link(trident, hosts, d, env, failures)
    sys.exit(runlib.report("multihost_test", failures))


if __name__ == "__main__":
    main()
