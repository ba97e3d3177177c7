#!/usr/bin/env python3
"""Issue #23's hang scenario with 4 ranks (Note [Hang dumps from every rank] in
src/train/run_monitor.cc): in a 4-rank `trident launch` run (oversubscribed), rank 2 is made to
sleep for 10 minutes inside operation #SEQ of the world communicator, after MPI finished it
(TRIDENT_TEST_SLEEP_COLLECTIVE, Note [Test hooks]); the other ranks go on to #SEQ+1 and wait
there. A [[alerts]] rule `hang` (timeout 5 s; log, stop) must end the whole job, with:
  - the job gone within LIMIT s of rank 2 falling asleep (timeout 5 s + the grace, 10 s, with
    room for a loaded 2-core machine; the sleep is 600 s), exit status 76;
  - hang_rank<r>.json from all 4 ranks (rank 0 waits for every dump before anyone exits, so
    this holds however far apart the watchdogs fire), whose flight records single out rank 2:
    its last world operation is #SEQ, still in flight; every other rank's is above #SEQ, and
    #SEQ is completed there;
  - hang_summary.json and rank 0's "hang: ..." line naming rank 2 as behind on communicator 0,
    its #SEQ all_reduce in flight, and ranks 0, 1 and 3 waiting in #SEQ+1;
  - one hang event in alerts.jsonl whose message says the same;
  - every rank's line "exiting with status 76" (a rank prints it before its dump, and rank 0
    ends the job only once it has every dump).
The same again with rank 3 stopped (SIGSTOP) from 2 s after rank 2's sleep until 3 s past the
timeout, as a rank on a loaded machine is late to notice: the others' watchdogs fire first,
and the job must still end only after rank 3's dump is in (and within LIMIT): exiting at once
would lose it (mpirun kills the rest when the first rank exits).

    hang_four_ranks_test.py TRIDENT
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import alerts, prepare_corpus, report, tiny_args, write_alerts  # noqa: E402

SEQ = 40         # world operation #40: a few steps in (about 8 world operations a step)
SLEEPER = 2
LIMIT = 60       # seconds from rank 2's sleep to the end of the job
DEADLINE = 300   # the whole run, startup of 4 ranks included
HUNG = 76
TIMEOUT = 5.0
STOP_AFTER_S = 2.0       # the late rank's stop, counted from rank 2's sleep
LATE_S = TIMEOUT + 3     # and its end


def rank_pid(rank, run):
    """The pid of `trident train` rank `rank` writing to `run` (Linux /proc)."""
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(environ, "rb") as f:
                variables = f.read().split(b"\0")
            with open(environ.replace("environ", "cmdline"), "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in variables and run.encode() in cmdline and \
                b"--train.out_dir" in cmdline:
            return int(environ.split("/")[2])
    return None


def scenario(trident, d, config, env, name, late=None):
    """One run; `late`: a rank stopped (SIGSTOP) from STOP_AFTER_S to LATE_S after rank 2's
    sleep, so that its watchdog fires 3 s after the others': they must wait for its dump."""
    failures = []
    run = os.path.join(d, name)
    cmd = [trident, "launch", "-n", "4", "--", "train", "--config", config] + tiny_args(d) + \
          ["--train.steps=200", "--train.eval_interval=0", f"--train.out_dir={run}"]
    start = time.time()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    asleep, lines, timer = None, [], None
    for line in p.stderr:
        lines.append(line)
        if asleep is None and "test hook: sleeping 600 s inside operation" in line:
            asleep = time.time()
            if late is not None:
                pid = rank_pid(late, run)
                if pid is None:
                    failures.append(f"no process for rank {late}")
                else:
                    # Stopped once it surely waits in #SEQ+1 (a step takes milliseconds), and
                    # let go 3 s after its watchdog would have fired.
                    time.sleep(STOP_AFTER_S)
                    os.kill(pid, signal.SIGSTOP)
                    timer = threading.Timer(LATE_S - STOP_AFTER_S, os.kill, (pid, signal.SIGCONT))
                    timer.start()
        if time.time() - start > DEADLINE:
            p.kill()
            break
    rc = p.wait()
    end = time.time()
    if timer is not None:
        timer.join()
    err = "".join(lines)
    if asleep is None:
        return [f"rank {SLEEPER} never fell asleep in operation #{SEQ} (exit {rc}):\n{err[-3000:]}"]
    print(f"{name}: the job ended {end - asleep:.1f} s after rank {SLEEPER} fell asleep; exit status {rc}")
    if end - asleep > LIMIT:
        failures.append(f"the job ended {end - asleep:.1f} s after rank {SLEEPER} fell asleep (limit {LIMIT} s)")
    if late is not None and end - asleep < LATE_S:
        failures.append(f"the job ended {end - asleep:.1f} s after the sleep, before rank {late} was let go "
                        f"({LATE_S} s): nobody waited for its dump")
    if rc != HUNG:
        failures.append(f"exit status {rc}, want {HUNG}")
    for rank in range(4):
        if f"rank {rank}: hang (hang): state in {run}/hang_rank{rank}.json; exiting with status {HUNG}" not in err:
            failures.append(f"rank {rank} did not say it exits with status {HUNG}")
    last = {}
    for rank in range(4):
        try:
            with open(os.path.join(run, f"hang_rank{rank}.json")) as f:
                world = [r for r in json.load(f)["flight_record"] if r["comm"] == 0]
        except (OSError, KeyError, ValueError) as e:
            failures.append(f"rank {rank}: no hang dump with a flight record ({e})")
            continue
        last[rank] = max(r["seq"] for r in world)
        mine = [r for r in world if r["seq"] == SEQ]
        want = "in flight" if rank == SLEEPER else "completed"
        if len(mine) != 1 or mine[0]["state"] != want:
            failures.append(f"rank {rank}: world #{SEQ} is {mine}, want it {want}")
    print(f"last sequence numbers on the world communicator per rank: {last}")
    if len(last) == 4 and not (last[SLEEPER] == SEQ and all(v > SEQ for r, v in last.items() if r != SLEEPER)):
        failures.append(f"the last sequence numbers {last} do not single out rank {SLEEPER} at #{SEQ}")
    want = (f"rank {SLEEPER} is behind on communicator 0 (4 ranks): its last operation there is #{SEQ} "
            f"all_reduce (in flight); ranks 0, 1 and 3 went on to #{SEQ + 1}")
    try:
        with open(os.path.join(run, "hang_summary.json")) as f:
            summary = json.load(f)
        b = summary["behind"]
        if summary["dumps_from"] != [0, 1, 2, 3] or b["ranks"] != [SLEEPER] or b["comm"] != 0 or \
                b["last_seq"] != SEQ or b["last_op"] != "all_reduce" or b["last_state"] != "in flight" or \
                b["ahead"] != [0, 1, 3] or not summary["text"].startswith(want):
            failures.append(f"hang_summary.json: {summary}")
    except (OSError, KeyError, ValueError) as e:
        failures.append(f"no hang_summary.json naming rank {SLEEPER} ({e})")
    if not re.search(r"^hang: " + re.escape(want), err, re.M):
        failures.append(f"rank 0 did not print the summary naming rank {SLEEPER}:\n{err[-3000:]}")
    ev = alerts(run)
    if len(ev) != 1 or ev[0]["condition"] != "hang" or want not in json.dumps(ev[0]):
        failures.append(f"alerts.jsonl: {ev}, want one hang event naming rank {SLEEPER}")
    return [f"{name}: {f}" for f in failures]


def main():
    trident = sys.argv[1]
    failures = []
    env = dict(os.environ, OMP_NUM_THREADS="1", TRIDENT_TEST_SLEEP_COLLECTIVE=f"{SEQ}:600:{SLEEPER}")
    with tempfile.TemporaryDirectory() as d:
        prepare_corpus(trident, d, env)
        config = write_alerts(os.path.join(d, "hang.toml"),
                              [{"name": "hang", "condition": "hang", "timeout": TIMEOUT, "actions": "log,stop"}])
        failures += scenario(trident, d, config, env, "run")
        failures += scenario(trident, d, config, env, "late", late=3)
    return report("hang_four_ranks", failures)


if __name__ == "__main__":
    sys.exit(main())
