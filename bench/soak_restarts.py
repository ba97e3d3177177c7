#!/usr/bin/env python3
"""Soak of `trident launch --max-restarts` (issue #47 item 6; Note [Restarts] in
apps/restart_policy.h): a 2-rank run on two "hosts" (network namespaces, tests/support/netns.py,
1 slot each) for --minutes, with a rank (chosen at random) killed with SIGKILL every 2-4
minutes (uniform), and once host h1 gone (it stops answering and its processes die) once the
run is past step C + 100: launch restarts on h0 alone with 1 rank from checkpoint C; past step
C' + 100, h1 answers again and the 1-rank job is killed: launch restarts on both hosts from C'.

At the end the soak stops the run with SIGTERM to launch (a checkpoint, exit 75; launch does not
restart a stop it passed on) at some step X. The reference, side by side from the start, is the
same command without kills in the same layouts: 2 ranks to step C, 1 rank to C', 2 ranks on
(each resuming the last one's checkpoint; one host), stopped past X. The learning-rate schedule
does not depend on train.steps (decay_steps is set), so the three legs are one run. Compared:
  - metrics.jsonl of the soak holds steps 1..X once each, in order (nothing lost or duplicated);
  - every loss equals the reference's bit for bit (a restart replays exactly; the data position
    is exact across the change of ranks, or the 1-rank leg would differ).
Why not "within 1e-5 of an uninterrupted 2-rank run": a change of ranks changes the reduction
order, and training amplifies that rounding (measured: 1 vs 2 ranks from the same start differ
by 2e-7 at step 90, 5e-6 at 120, 1e-4 at 150, 1e-2 by 300). tests/parallel/launch_restart_test.py
checks the change of ranks against an unchanged run over the 40 steps after it (within 1e-5).
Prints one JSON object and writes it (result.json) and launch's events (launch_events.log)
under --out.

Needs root and iproute2 (the hosts).

    soak_restarts.py TRIDENT [--minutes 30] [--one-rank-steps C:C'] [--out DIR] [--seed 1]
"""
import argparse
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
import netns  # noqa: E402
from runlib import prepare_corpus, rank_pids, tiny_args  # noqa: E402


def rows(run):
    path = os.path.join(run, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a line being written
            if "loss" in r:
                out.append(r)
    return out


def last_step(run):
    r = rows(run)
    return r[-1]["step"] if r else 0


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in info.splitlines() if ":" in line)}
        return f"{fields.get('model name', '')} (family {fields.get('cpu family', '')} model {fields.get('model', '')}), " \
               f"{os.cpu_count()} cores"
    except OSError:
        return platform.processor()


class Reference(threading.Thread):
    """The soak's command without kills, in its layouts: 2 ranks to step c, 1 rank to c2, then 2
    ranks until stop() (each leg resumes the last one's final checkpoint)."""

    def __init__(self, trident, args, run, env, c, c2):
        super().__init__(daemon=True)
        self.trident, self.args, self.run_dir, self.env, self.c, self.c2 = trident, args, run, env, c, c2
        self.proc, self.stopping, self.statuses = None, False, []

    def run(self):
        for ranks, steps in ((2, self.c), (1, self.c2), (2, None)):
            if self.stopping:
                return
            extra = [f"--train.steps={steps}"] if steps else []
            self.proc = subprocess.Popen([self.trident, "launch", "-n", str(ranks), "--", "train"] + self.args + extra +
                                         [f"--train.out_dir={self.run_dir}"], env=self.env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.statuses.append(self.proc.wait())

    def stop_past(self, step):
        while self.is_alive() and last_step(self.run_dir) < step:
            time.sleep(0.5)
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.join(timeout=300)


def resumes(launch_log):
    """[(ranks of the attempt, step it resumed from)] in order, from launch's log."""
    out, ranks = [], None
    for line in launch_log.splitlines():
        m = re.match(r"launch: \S*mpirun -np (\d+) ", line)
        if m:
            ranks = int(m.group(1))
        m = re.search(r"resuming \S*step_0*(\d+)", line)
        if m and ranks is not None:
            out.append((ranks, int(m.group(1))))
            ranks = None
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trident")
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--one-rank-steps", default="4000:6000", help="C:C', multiples of the checkpoint interval (200)")
    p.add_argument("--kill-every", default="120:240", help="seconds between kills, uniform MIN:MAX")
    p.add_argument("--out", default=None)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    why = netns.available()
    if why:
        print(f"soak_restarts: cannot make hosts here: {why}", file=sys.stderr)
        return 77
    trident = os.path.abspath(a.trident)
    rng = random.Random(a.seed)
    kmin, kmax = (float(x) for x in a.kill_every.split(":"))
    c, c2 = (int(x) for x in a.one_rank_steps.split(":"))
    interval = 200
    if c % interval or c2 % interval or not 0 < c < c2:
        p.error(f"--one-rank-steps {a.one_rank_steps}: want 0 < C < C', multiples of {interval}")
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory(prefix="trident_soak_") as d, netns.Hosts(2) as hosts:
        prepare_corpus(trident, d, env)
        args = tiny_args(d, n_embd=96, seq_len=128, batch_size=8) + [
            "--train.steps=1000000", "--lr_schedule.decay_steps=1000000", f"--train.checkpoint_interval={interval}",
            "--train.eval_interval=0", "--train.checkpoint_keep=3"]
        soak_run, ref_run = os.path.join(d, "soak"), os.path.join(d, "reference")
        launch_flags = ["-n", "2", "--hostfile", hosts.hostfile(slots=1), "--min-ranks", "1", "--max-restarts", "10",
                        "--restart-window", "600", "--restart-backoff", "1", "--host-check-timeout", "5"]
        log_path = os.path.join(d, "launch.log")
        log = open(log_path, "w")
        soak = hosts.popen(0, [trident, "launch"] + launch_flags + ["--", "train"] + args +
                           [f"--train.out_dir={soak_run}"], env=hosts.mpi_env(env), stdout=log,
                           stderr=subprocess.STDOUT)
        ref = Reference(trident, args, ref_run, env, c, c2)
        ref.start()
        t0 = time.time()
        events = []
        phase = "two ranks"  # then "h1 gone", then "h1 back"

        def event(what, **kw):
            events.append(dict({"t_s": round(time.time() - t0, 1), "step": last_step(soak_run), "event": what}, **kw))

        next_kill = t0 + rng.uniform(kmin, kmax)
        while time.time() - t0 < 60 * a.minutes:
            if soak.poll() is not None:
                event(f"launch ended early with {soak.returncode}")
                break
            step = last_step(soak_run)
            if phase == "two ranks" and c + 100 <= step < c + interval:
                hosts.down(1)
                phase = "h1 gone"
                event("h1 gone")
            elif phase == "h1 gone" and c2 + 100 <= step < c2 + interval:
                hosts.up(1)
                pids = rank_pids(soak_run)
                for pid in pids.values():
                    os.kill(pid, signal.SIGKILL)
                phase = "h1 back"
                event("h1 answers again; the 1-rank job killed", ranks_running=len(pids))
            elif time.time() >= next_kill:
                pids = rank_pids(soak_run)
                if pids:
                    rank = rng.choice(sorted(pids))
                    try:
                        os.kill(pids[rank], signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    event(f"rank {rank} killed", ranks_running=len(pids))
                next_kill = time.time() + rng.uniform(kmin, kmax)
            time.sleep(0.1)
        if soak.poll() is None:
            soak.send_signal(signal.SIGTERM)  # a checkpoint and exit 75 (or 75 between attempts)
        try:
            soak.wait(timeout=300)
        except subprocess.TimeoutExpired:
            soak.kill()
            soak.wait()
        log.close()
        soak_wall = time.time() - t0
        soak_rows = rows(soak_run)
        x = soak_rows[-1]["step"] if soak_rows else 0
        ref.stop_past(x)
        ref_loss = {r["step"]: r["loss"] for r in rows(ref_run)}
        soak_steps = [r["step"] for r in soak_rows]
        with open(log_path) as f:
            launch_log = f.read()
        restarts = [line for line in launch_log.splitlines() if line.startswith("launch: the job failed")]
        differing = [r["step"] for r in soak_rows if ref_loss.get(r["step"]) != r["loss"]]
        attempts = resumes(launch_log)
        result = {
            "bench": "soak_restarts",
            "date": time.strftime("%Y-%m-%d"),
            "cpu": cpu_name(),
            "minutes": round(soak_wall / 60, 1),
            "launch_flags": launch_flags,
            "one_rank_from_to": [c, c2],
            "events": events,
            "restarts": len(restarts),
            "restart_lines": restarts,
            "attempts_ranks_and_resume_step": attempts,
            "steps": x,
            "metrics_steps_each_once_in_order": soak_steps == list(range(1, x + 1)),
            "reference_steps": len(ref_loss),
            "reference_leg_statuses": ref.statuses,
            "steps_whose_loss_differs_from_the_reference": len(differing),
            "first_differing_step": differing[0] if differing else None,
            "launch_exit": soak.returncode,
        }
        result["pass"] = bool(result["metrics_steps_each_once_in_order"] and not differing and x > c2 and
                              (1, c) in attempts and (2, c2) in attempts and len(restarts) >= 5 and
                              soak.returncode == 75)
        print(json.dumps(result, indent=1))
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "result.json"), "w") as f:
                json.dump(result, f, indent=1)
            # launch's own lines, the ranks' last words and mpirun's verdicts (not the configs
            # each attempt prints, nor the progress lines).
            keep = re.compile(r"^launch: |^trident \(rank|mpirun noticed|^resuming ")
            with open(os.path.join(a.out, "launch_events.log"), "w") as f:
                for line in launch_log.splitlines():
                    if keep.search(line):
                        f.write(re.sub(r" --model\.n_layer=.*--train\.out_dir=", " ... --train.out_dir=", line) + "\n")
        return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
