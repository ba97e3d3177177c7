#!/usr/bin/env python3
"""`trident launch --max-restarts` end to end (issue #47 item 6; Note [Restarts] and Note
[Restarts with fewer ranks] in apps/restart_policy.h):

1. rank killed: a 2-rank run (checkpoint every 10 steps) loses rank 1 to SIGKILL at step 25 and
   again at step 45 of its restart: launch restarts it twice (naming the rank and the signal),
   and the run ends with exit 0 and the per-step losses of an uninterrupted 2-rank run bit for
   bit, each step once in metrics.jsonl;
2. budget: the same with --max-restarts 1 gives up after the second kill, saying so, with the
   job's failure status;
3. a rule's stop: a plateau rule with actions log,stop ends the job with 79 and launch does not
   restart it;
4. a host gone (two "hosts" as network namespaces, 1 slot each, tests/support/netns.py): at
   step 25, h1 stops answering (its agent fails) and its processes are killed; launch checks
   the hosts, restarts on h0 alone with 1 rank, and the run ends with the 2-rank losses up to
   the checkpoint bit for bit and within 1e-5 relative after it (the reduction order changes;
   data order and global batch do not);
5. a layout that does not fit the ranks left: hosts of 3 and 1 slots, -n 4, a global batch of 4:
   h1 gone leaves 3 ranks, which exit 78 (the batch does not split); launch tries 2 at once, and
   the run finishes. 4 and 5 are skipped (with the reason) without root and iproute2.

    launch_restart_test.py TRIDENT
"""
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import netns  # noqa: E402
from runlib import metrics, prepare_corpus, rank_pids, report, tiny_args  # noqa: E402

TIMEOUT = 400
STEPS = 60


def logged_steps(run):
    """The steps of metrics.jsonl's training rows, in file order."""
    import json
    path = os.path.join(run, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["step"] for r in rows if "loss" in r]


def wait_until(cond, proc, timeout=TIMEOUT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def finish(proc, what, failures):
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        failures.append(f"{what}: did not end within {TIMEOUT} s\n{err[-3000:]}")
    return proc.returncode, err


class Test:
    def __init__(self, trident, d):
        self.trident, self.d, self.failures = trident, d, []
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        prepare_corpus(trident, d, self.env)
        self.args = tiny_args(d, batch_size=8) + [f"--train.steps={STEPS}", "--train.checkpoint_interval=10",
                                                  "--train.eval_interval=0"]

    def train(self, run, launch_flags, extra=(), env=None, popen=subprocess.Popen):
        cmd = [self.trident, "launch"] + launch_flags + ["--", "train"] + self.args + list(extra) + \
              [f"--train.out_dir={run}"]
        return popen(cmd, env=env or self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                     errors="replace")

    def kill_rank_at(self, run, proc, step, rank=1):
        """SIGKILL to rank `rank` once the run has logged past `step`; False if it ended first."""
        if not wait_until(lambda: len(logged_steps(run)) > 0 and max(logged_steps(run)) >= step, proc):
            return False
        pid = rank_pids(run).get(rank)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        return pid is not None

    def reference(self):
        run = os.path.join(self.d, "reference")
        code, err = finish(self.train(run, ["-n", "2"]), "reference", self.failures)
        if code != 0:
            self.failures.append(f"reference: exit {code}\n{err[-3000:]}")
        return metrics(run)[0]

    def rank_killed(self, reference):
        run = os.path.join(self.d, "killed")
        proc = self.train(run, ["-n", "2", "--max-restarts", "2", "--restart-backoff", "0.2"])
        kills = [self.kill_rank_at(run, proc, 25)]
        # The restart resumes from step 20; kill it again once it is past step 45.
        kills.append(self.kill_rank_at(run, proc, 45))
        code, err = finish(proc, "rank killed", self.failures)
        losses, steps = metrics(run)[0], logged_steps(run)
        restarts = [line for line in err.splitlines() if line.startswith("launch: the job failed")]
        if kills != [True, True] or code != 0 or len(restarts) != 2 or "rank 1" not in restarts[0] or \
                "signal 9" not in restarts[0] or "restart 2 of 2" not in restarts[1]:
            self.failures.append(f"rank killed twice: kills {kills}, exit {code}, restart lines {restarts}\n"
                                 f"{err[-3000:]}")
        elif steps != list(range(1, STEPS + 1)) or losses != reference:
            bad = [i + 1 for i, (a, b) in enumerate(zip(losses, reference)) if a != b]
            self.failures.append(f"rank killed twice: steps logged {steps[:5]}..{steps[-5:]} ({len(steps)}), "
                                 f"first step whose loss differs {bad[:1]}")
        else:
            print(f"launch_restart_test: rank 1 killed at steps 25 and 45: two restarts ({restarts[0]}), "
                  f"{STEPS} steps each logged once, losses the uninterrupted run's bit for bit")

    def budget(self):
        run = os.path.join(self.d, "budget")
        proc = self.train(run, ["-n", "2", "--max-restarts", "1", "--restart-backoff", "0.2"])
        kills = [self.kill_rank_at(run, proc, 15), self.kill_rank_at(run, proc, 25)]
        code, err = finish(proc, "budget", self.failures)
        gave_up = [line for line in err.splitlines() if line.startswith("launch: giving up after 1 restart(s)")]
        if kills != [True, True] or code in (0, 75) or not gave_up or rank_pids(run):
            self.failures.append(f"budget: kills {kills}, exit {code}, giving-up line {gave_up}, "
                                 f"ranks left {rank_pids(run)}\n{err[-3000:]}")
        else:
            print(f"launch_restart_test: --max-restarts 1, killed twice: exit {code}: {gave_up[0]}")

    def rule_stop(self):
        run = os.path.join(self.d, "rule_stop")
        cfg = os.path.join(self.d, "stop.toml")
        with open(cfg, "w") as f:
            f.write('[[alerts]]\nname = "flat"\ncondition = "plateau"\npatience = 1\nmin_delta = 0.5\n'
                    'actions = "log,stop"\n')
        # No evaluation improves by 0.5 at lr 1e-9: the rule stops the run at step 4.
        code, err = finish(self.train(run, ["-n", "2", "--max-restarts", "3", "--restart-backoff", "0.2"],
                                      ["--config", cfg, "--optim.lr=1e-9", "--train.eval_interval=2",
                                       "--train.eval_batches=1"]), "rule stop", self.failures)
        attempts = [line for line in err.splitlines() if line.startswith("launch: /") or " -np " in line]
        if code != 79 or "launch: not restarting: exit status 79" not in err or len(attempts) != 1:
            self.failures.append(f"rule stop: exit {code}, {len(attempts)} attempt(s)\n{err[-3000:]}")
        else:
            print("launch_restart_test: a rule's stop: exit 79, one attempt, 'launch: not restarting: exit status 79'")

    def host_gone(self, reference):
        why = netns.available()
        if why:
            print(f"launch_restart_test: host gone: skipped ({why})")
            return
        with netns.Hosts(2) as hosts:
            run = os.path.join(hosts.tmp, "host_gone")
            env = hosts.mpi_env(self.env)
            flags = ["-n", "2", "--hostfile", hosts.hostfile(slots=1), "--min-ranks", "1", "--max-restarts", "2",
                     "--restart-backoff", "0.2", "--host-check-timeout", "5"]
            proc = self.train(run, flags, env=env, popen=lambda cmd, **kw: hosts.popen(0, cmd, **kw))
            if not wait_until(lambda: len(logged_steps(run)) > 0 and max(logged_steps(run)) >= 25, proc):
                self.failures.append("host gone: the run ended before step 25")
                return
            hosts.down(1)
            code, err = finish(proc, "host gone", self.failures)
            losses, steps = metrics(run)[0], logged_steps(run)
            restarted = [line for line in err.splitlines() if "restarting with 1 rank(s)" in line]
            worst = max((abs(a - b) / abs(b) for a, b in zip(losses, reference)), default=math.inf)
            if code != 0 or not restarted or steps != list(range(1, STEPS + 1)):
                self.failures.append(f"host gone: exit {code}, restart line {restarted}, {len(steps)} steps\n"
                                     f"{err[-3000:]}")
            elif losses[:20] != reference[:20] or worst > 1e-5:
                self.failures.append(f"host gone: losses differ from the 2-rank run's: bit for bit up to step 20 "
                                     f"{losses[:20] == reference[:20]}, worst relative difference {worst:.3g}")
            else:
                print(f"launch_restart_test: host h1 gone at step 25: {restarted[0].strip()}; steps 1..20 bit for "
                      f"bit, after: within {worst:.2g} relative of the uninterrupted 2-rank run")

    def fewer_ranks_than_fit(self):
        """Hosts h0 (3 slots) and h1 (1), -n 4, data.batch_size 4: h1 gone leaves 3 ranks, which
        cannot split the batch (exit 78 on 3 ranks); launch tries 2 at once, which can."""
        why = netns.available()
        if why:
            print(f"launch_restart_test: fewer ranks than fit: skipped ({why})")
            return
        with netns.Hosts(2) as hosts:
            run = os.path.join(hosts.tmp, "fewer")
            hostfile = os.path.join(hosts.tmp, "hosts_3_1")
            with open(hostfile, "w") as f:
                f.write("h0 slots=3\nh1 slots=1\n")
            flags = ["-n", "4", "--hostfile", hostfile, "--min-ranks", "1", "--max-restarts", "2",
                     "--restart-backoff", "0.2", "--host-check-timeout", "5"]
            proc = self.train(run, flags, ["--data.batch_size=4", "--train.steps=30"], env=hosts.mpi_env(self.env),
                              popen=lambda cmd, **kw: hosts.popen(0, cmd, **kw))
            if not wait_until(lambda: len(logged_steps(run)) > 0 and max(logged_steps(run)) >= 12, proc):
                self.failures.append("fewer ranks than fit: the run ended before step 12")
                return
            hosts.down(1)
            code, err = finish(proc, "fewer ranks than fit", self.failures)
            tried = [line for line in err.splitlines() if "exit status 78 (a configuration error) on 3 ranks" in line]
            if code != 0 or not tried or logged_steps(run) != list(range(1, 31)):
                self.failures.append(f"fewer ranks than fit: exit {code}, fallback line {tried}, steps "
                                     f"{logged_steps(run)}\n{err[-3000:]}")
            else:
                print(f"launch_restart_test: h1 gone with 3 of 4 ranks left: {tried[0].strip()}; finished on 2")


def main():
    trident = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="trident_launch_restart_") as d:
        t = Test(trident, d)
        reference = t.reference()
        if len(reference) != STEPS:
            return report("launch_restart", t.failures + [f"reference: {len(reference)} steps"])
        t.rank_killed(reference)
        t.budget()
        t.rule_stop()
        t.host_gone(reference)
        t.fewer_ranks_than_fit()
        return report("launch_restart", t.failures)


if __name__ == "__main__":
    sys.exit(main())
