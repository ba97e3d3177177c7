#!/usr/bin/env python3
"""Preemption end to end (Note [Preemption] in src/train/trainer.cc): a run that is sent
SIGTERM, or whose train.max_runtime runs out, finishes the step it is in, writes a checkpoint
and exits with status 75; running the same command again resumes it, and the two pieces'
per-step losses (and evaluations) are the uninterrupted run's bit for bit. Cases:

  - one process, SIGTERM;
  - `trident launch -n 2`, SIGTERM to rank 1 only: every rank stops at the same step (data,
    tensor and pipeline parallel);
  - `trident launch -n 2`, SIGTERM to launch itself (forwarded to the ranks);
  - `trident launch -n 2` and one process, train.max_runtime;
  - one process and `trident launch -n 2`, Ctrl-C twice: ends at once, writing nothing;
  - not a preemption: rank 1 killed, the job still ends within a minute, with last words.

    preemption_test.py TRIDENT
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

STOPPED = 75
TIMEOUT = 240
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Runs, metrics, prepare_corpus, rank_pids  # noqa: E402


def last_step(run_dir):
    losses, _ = metrics(run_dir)
    return len(losses)


def checkpoints(run_dir):
    return sorted(int(n[5:]) for n in os.listdir(run_dir) if n.startswith("step_") and n[5:].isdigit()) \
        if os.path.isdir(run_dir) else []


def wait_for_step(run_dir, step, proc):
    """Waits until the run has logged `step` steps; False if it ended first."""
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        if last_step(run_dir) >= step:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.005)
    return False


def rank_pid(run_dir, rank):
    """The pid of the rank `rank` process that trains into run_dir (from /proc)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        pid = rank_pids(run_dir).get(rank)
        if pid is not None:
            return pid
        time.sleep(0.01)
    return None


def survivors(run_dir):
    """Processes still training into run_dir (there must be none once launch returned)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f"--train.out_dir={run_dir}".encode() in f.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                pass
    return found


class Test(Runs):
    def __init__(self, trident, d):
        super().__init__(trident, d, dict(os.environ, OMP_NUM_THREADS="1"))
        prepare_corpus(trident, d, self.env)
        self.steps = 60
        self.args = ["--model.n_layer=2", "--model.n_head=2", "--model.n_embd=96", "--model.block_size=128",
                     "--model.vocab_size=256", "--data.tokenizer=byte", f"--data.train_file={d}/data/train.bin",
                     f"--data.val_file={d}/data/val.bin", "--data.batch_size=8", "--data.seq_len=128",
                     "--model.dropout=0.1", f"--train.steps={self.steps}", "--train.eval_interval=20",
                     "--train.eval_batches=2", "--train.threads=1"]
        self.layout = []  # parallel.* overrides of the runs that follow

    def reference(self, ranks, name):
        run = os.path.join(self.d, name)
        code, err = self.finish(self.start(ranks, run), name)
        if code != 0:
            self.failures.append(f"{name}: exit {code}\n{err[-3000:]}")
        got = metrics(run)
        if len(got[0]) != self.steps:
            self.failures.append(f"{name}: {len(got[0])} steps logged, not {self.steps}")
        return got

    def resume_and_compare(self, ranks, run, reference, what, extra=()):
        """Runs the same command again: it must resume and end with the reference's losses."""
        code, err = self.finish(self.start(ranks, run, extra), what + " (resumed)")
        if code != 0:
            self.failures.append(f"{what}, resumed: exit {code}\n{err[-3000:]}")
            return
        train, val = metrics(run)
        if (train, val) != reference:
            bad = [i + 1 for i, (a, b) in enumerate(zip(train, reference[0])) if a != b]
            self.failures.append(f"{what}: after resuming, {len(train)} train losses (first differing step "
                                 f"{bad[:1]}) and val {val} are not the uninterrupted run's {reference[1]}")
        else:
            print(f"preemption_test: {what}: resumed to the uninterrupted losses bit for bit "
                  f"({len(train)} steps, {len(val)} evaluations)")

    def expect_stopped(self, code, err, run, what, reason, seen=None):
        """Exit 75, a message naming why, and one checkpoint at the last logged step (the
        step in flight when the signal came, at most one or two past `seen`)."""
        if code != STOPPED:
            self.failures.append(f"{what}: exit {code}, not {STOPPED}\n{err[-3000:]}")
            return False
        if reason not in err:
            self.failures.append(f"{what}: stderr does not say '{reason}'\n{err[-3000:]}")
        done = last_step(run)
        if checkpoints(run) != [done] or not 0 < done < self.steps:
            self.failures.append(f"{what}: checkpoints {checkpoints(run)} after {done} logged steps of {self.steps}")
            return False
        if seen is not None and done > seen + 3:
            self.failures.append(f"{what}: the signal came after step {seen}, but the run went on to {done}")
        left = survivors(run)
        if left:
            self.failures.append(f"{what}: processes {left} still running after the run ended")
        after = f" (signal after step {seen})" if seen is not None else ""
        print(f"preemption_test: {what}: stopped after step {done}{after} with exit {code}")
        return True

    def signal_run(self, ranks, name, target, reference, reason):
        run = os.path.join(self.d, name)
        proc = self.start(ranks, run)
        if not wait_for_step(run, 3, proc):
            code, err = self.finish(proc, name)
            self.failures.append(f"{name}: ended (exit {code}) before step 3\n{err[-3000:]}")
            return
        pid = proc.pid if target == "self" else rank_pid(run, target)
        if pid is None:
            self.failures.append(f"{name}: rank {target}'s process not found")
            proc.kill()
            return
        # The run stops within the step in flight: a step or two past what rank 0 has logged
        # (three, for the way through launch and mpirun).
        seen = last_step(run)
        os.kill(pid, signal.SIGTERM)
        code, err = self.finish(proc, name)
        if self.expect_stopped(code, err, run, name, reason, seen):
            self.resume_and_compare(ranks, run, reference, name)

    def rank_dies(self):
        """Not a preemption: rank 1 is killed (SIGKILL) mid-run. mpirun ends the survivor with
        SIGTERM, which under `train` is a stop request, then SIGKILL: the job must still end
        within a minute, with an error status (not 75), the survivor's last words naming what
        it was in, and no checkpoint written for a stop (Note [Distributed failures])."""
        run = os.path.join(self.d, "two_ranks_rank1_killed")
        proc = self.start(2, run, ["--train.steps=100000", "--train.eval_interval=0"])
        if not wait_for_step(run, 3, proc):
            self.failures.append("rank killed: the run ended before step 3")
            return
        pid = rank_pid(run, 1)
        if pid is None:
            self.failures.append("rank killed: rank 1's process not found")
            proc.kill()
            return
        killed = time.time()
        os.kill(pid, signal.SIGKILL)
        code, err = self.finish(proc, "rank killed")
        took = time.time() - killed
        last_words = [line for line in err.splitlines() if line.startswith("trident (rank 0):") and " while " in line]
        if code in (0, STOPPED) or took > 60 or not last_words or checkpoints(run) or survivors(run):
            self.failures.append(f"rank killed: exit {code} after {took:.1f} s, last words {last_words}, checkpoints "
                                 f"{checkpoints(run)}, survivors {survivors(run)}\n{err[-3000:]}")
        else:
            print(f"preemption_test: rank 1 killed: the job ended in {took:.1f} s with exit {code}; rank 0 said: "
                  f"{last_words[0]}")

    def budget_run(self, ranks, name, reference):
        run = os.path.join(self.d, name)
        # Half a second: the run stops well before its 60 steps and still makes some.
        code, err = self.finish(self.start(ranks, run, ["--train.max_runtime=0.5s"]), name)
        if self.expect_stopped(code, err, run, name, 'train.max_runtime = "0.5s" would run out'):
            self.resume_and_compare(ranks, run, reference, name, ["--train.max_runtime=1h"])

    def double_interrupt(self, ranks, name):
        """Ctrl-C, then Ctrl-C again while the step is still running: the process (or the job)
        ends at once, without finishing the step or writing a checkpoint. Steps of about a
        second here (a wider model), so that the second Ctrl-C comes well inside one."""
        run = os.path.join(self.d, name)
        slow = ["--model.n_layer=4", "--model.n_head=4", "--model.n_embd=256", "--model.block_size=256",
                "--data.seq_len=256", "--train.steps=6", "--train.eval_interval=0", "--train.eval_batches=1"]
        proc = self.start(ranks, run, slow)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        if not wait_for_step(run, 1, proc):
            self.failures.append(f"{name}: the run ended before step 1")
            return
        os.kill(proc.pid, signal.SIGINT)
        # The first Ctrl-C is seen (each rank says so) before the second is sent.
        want = "stop requested" if ranks == 0 else "SIGUSR1 received"
        deadline = time.time() + 30
        while sum(want in line for line in lines) < max(ranks, 1) and time.time() < deadline:
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
        reader.join(timeout=10)
        err = "".join(lines)
        if proc.returncode != 130 or checkpoints(run) or last_step(run) >= 6:
            self.failures.append(f"{name}: exit {proc.returncode} (want 130), checkpoints "
                                 f"{checkpoints(run)} (want none) after {last_step(run)} steps\n{err[-3000:]}")
        elif survivors(run):
            self.failures.append(f"{name}: processes {survivors(run)} still running")
        else:
            print(f"preemption_test: {name}: ended at once (exit {proc.returncode}) after {last_step(run)} steps, "
                  "no checkpoint")


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="trident_preemption_test_") as d:
        t = Test(trident, d)
        one = t.reference(0, "one_process_reference")
        two = t.reference(2, "two_ranks_reference")
        t.signal_run(0, "one_process_sigterm", "self", one, "SIGTERM received")
        t.signal_run(2, "two_ranks_sigterm_to_rank1", 1, two, "SIGTERM received on rank 1")
        t.signal_run(2, "two_ranks_sigterm_to_launch", "self", two, "SIGUSR1 received on rank")
        # Model-parallel layouts: each rank writes its shards of the checkpoint.
        for name, layout in (("tp2", ["--parallel.tp=2"]), ("pp2", ["--parallel.pp=2", "--data.grad_accum_steps=2"])):
            t.layout = layout
            ref = t.reference(2, f"two_ranks_{name}_reference")
            t.signal_run(2, f"two_ranks_{name}_sigterm_to_rank1", 1, ref, "SIGTERM received on rank 1")
        t.layout = []
        t.budget_run(0, "one_process_max_runtime", one)
        t.budget_run(2, "two_ranks_max_runtime", two)
        t.rank_dies()
        t.double_interrupt(0, "one_process_ctrl_c_twice")
        t.double_interrupt(2, "launch_ctrl_c_twice")
        failures = t.failures
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
