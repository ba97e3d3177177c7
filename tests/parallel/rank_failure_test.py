#!/usr/bin/env python3
"""One of 4 ranks fails mid-step; every rank must be gone within 60 s, non-zero, with the
failed rank and the operations named (issue #5's failure requirement).

Runs `mpiexec -np 4 --oversubscribe rank_failure_probe DIR 2 MODE` twice:
  kill  rank 2 SIGKILLs itself during the third backward. The output must name rank 2 as the
        process that failed (mpirun's report), and the survivors the operation they were in.
  hang  rank 2 stops taking part without exiting; with TRIDENT_COMM_TIMEOUT_S=5 the others'
        waits time out, name the operation and end the job.
Either way the job exits non-zero within 60 s of the failure (hard limit 120 s per run).

    rank_failure_test.py MPIEXEC PROBE
"""
import os
import re
import subprocess
import sys
import tempfile
import time


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
    failures = []
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
