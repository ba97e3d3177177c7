#!/usr/bin/env python3
"""One of 4 ranks fails mid-step; every rank must be gone within 60 s, non-zero, with the
failed rank and the operations named (issue #5's failure requirement).

Runs `mpiexec -np 4 --oversubscribe rank_failure_probe DIR 2 MODE` twice:
  kill  rank 2 SIGKILLs itself during the third backward. The output must name rank 2 as the
        process that failed (mpirun's report), and the survivors the operation they were in.
  hang  rank 2 stops taking part without exiting; with TRIDENT_COMM_TIMEOUT_S=5 the others'
        waits time out, name the operation, print their flight records, write them to
        run/flight_rank<r>.json (each rank whose timeout fired before the first one ended the
        job) and end the job; their message names rank 2 as the rank that stopped taking part
        (it wrote no flight record: Note [Naming the rank at a timeout]). The hang rule (2 s, log) has every rank, the
        sleeping one too, write run/hang_rank<r>.json with its flight record: the rank whose
        sequence numbers on the world communicator stop short of the others' must be rank 2,
        and the operations the others wait in must be collectives (Note [Reading a flight
        record] in src/comm/flight_recorder.h).
Either way the job exits non-zero within 60 s of the failure (hard limit 120 s per run).

    rank_failure_test.py MPIEXEC PROBE
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def flight_records(run, timed_out):
    """Failures of the hang scenario's dumps (empty when they name rank 2 and a collective).
    timed_out: the ranks that reported their collective's timeout."""
    failures, last = [], {}
    for rank in range(4):
        try:
            with open(os.path.join(run, f"hang_rank{rank}.json")) as f:
                record = json.load(f)["flight_record"]
        except (OSError, KeyError, ValueError) as e:
            failures.append(f"rank {rank}: no hang dump with a flight record ({e})")
            continue
        world = [r for r in record if r["comm"] == 0]
        last[rank] = max((r["seq"] for r in world), default=0)
        if rank != 2 and not any(r["state"] == "in flight" and r["op"] in ("all_reduce", "barrier") for r in world):
            failures.append(f"rank {rank} waits in no collective: {record[-3:]}")
    if len(last) == 4 and not all(last[2] < v for r, v in last.items() if r != 2):
        failures.append(f"the last sequence numbers per rank {last} do not single out rank 2")
    # The timeout path's own dumps, written before its message: by every rank that reported its
    # timeout. The first such rank ends the job (MPI_Abort), so on a loaded machine the others
    # may be gone before their own waits time out.
    for rank in sorted(timed_out):
        if not os.path.exists(os.path.join(run, f"flight_rank{rank}.json")):
            failures.append(f"rank {rank} reported its timeout but wrote no flight_rank{rank}.json")
    print(f"last sequence numbers on the world communicator per rank: {last}")
    return failures


def scenario(mpiexec, probe, mode):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               TRIDENT_COMM_TIMEOUT_S="5")
    with tempfile.TemporaryDirectory(prefix="trident_rank_failure_") as d:
        start = time.time()
        p = subprocess.Popen([mpiexec, "-np", "4", "--oversubscribe", probe, d, "2", mode], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        killed_at = None
        lines = []
        for line in p.stdout:
            lines.append(line)
            sys.stdout.write(line)
            if "kills itself" in line or "hangs now" in line:
                killed_at = time.time()
            if time.time() - start > 120:
                p.kill()
                sys.exit("FAIL: the job was still running after 120 s")
        rc = p.wait()
        end = time.time()
        out = "".join(lines)
        timed_out = set(re.findall(r"trident \(rank (\d)\): .+ did not complete within", out))
        failures = flight_records(os.path.join(d, "run"), timed_out) if mode == "hang" else []
    if mode == "hang" and "flight record" not in out:
        failures.append("no survivor printed its flight record")
    if killed_at is None:
        failures.append("rank 2 never reached the point where it kills itself")
    elif end - killed_at > 60:
        failures.append(f"the job ended {end - killed_at:.1f} s after rank 2 died (limit 60 s)")
    if rc == 0:
        failures.append("mpiexec exited 0 although a rank died")
    ops = r"all_reduce|barrier|broadcast|all_gather|reduce_scatter"
    if mode == "kill":
        if not re.search(r"rank 2\b.*(exited on signal|killed|terminated)", out, re.I | re.S):
            failures.append("nothing names rank 2 as the rank that failed")
        survivors = re.findall(r"trident \(rank (\d)\): stopped by signal \d+ .* while (.+)", out)
    else:
        survivors = re.findall(r"trident \(rank (\d)\): (.+) did not complete within", out)
        # Note [Naming the rank at a timeout]: the survivor that ends the job names rank 2.
        if not re.search(r"did not complete within \d+ s.*; rank 2 stopped taking part", out):
            failures.append("no timeout message names rank 2 as the rank that stopped taking part")
    named = {r for r, what in survivors if re.search(ops, what) and r != "2"}
    if not named:
        failures.append("no surviving rank named the operation it was in")
    print(f"\nrank_failure_test [{mode}]: exit code {rc}, {end - (killed_at or start):.1f} s after the failure; "
          f"survivors that named their operation: {sorted(named)}")
    return failures


def main():
    mpiexec, probe = sys.argv[1], sys.argv[2]
    failures = []
    for mode in ("kill", "hang"):
        failures += [f"{mode}: {f}" for f in scenario(mpiexec, probe, mode)]
    if failures:
        sys.exit("FAIL: " + "; ".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
