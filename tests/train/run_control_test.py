#!/usr/bin/env python3
"""Run control end to end (Note [Control at step boundaries] in src/train/trainer.cc):

  - one process: `trident ctl URL pause` holds the run at a step boundary (the step count and
    metrics.jsonl stop growing, the process sleeps: under 0.5 CPU-seconds in 2 s), `ctl
    checkpoint` writes one there, a wrong token is refused and changes nothing, `ctl resume`
    continues; the whole run's losses equal an uninterrupted run's bit for bit;
  - `trident launch -n 2`: GET /metrics on each rank's port (monitor.port + local rank)
    shows its own rank label; a pause holds both ranks at the same step; `ctl stop` writes a
    checkpoint and exits 75; the same command resumes and ends with the losses of an
    uninterrupted 2-rank run.
  - errors name what to fix: nothing listening at the URL (and what to check), a port out of
    1-65535 or not a number, a --token-file that cannot be read (as that flag).

    run_control_test.py TRIDENT
"""
import os
import re
import subprocess
import sys
import tempfile
import time

STOPPED = 75
TIMEOUT = 240
TOKEN = "test-token-123"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Runs, free_port, get, metrics, prepare_corpus, report, status  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Test(Runs):
    def __init__(self, trident, d):
        super().__init__(trident, d, dict(os.environ, OMP_NUM_THREADS="1", TRIDENT_CONTROL_TOKEN=TOKEN))
        prepare_corpus(trident, d, self.env)
        self.steps = 120
        self.args = ["--model.n_layer=2", "--model.n_head=2", "--model.n_embd=64", "--model.block_size=64",
                     "--model.vocab_size=256", "--data.tokenizer=byte", f"--data.train_file={d}/data/train.bin",
                     f"--data.val_file={d}/data/val.bin", "--data.batch_size=4", "--data.seq_len=64",
                     "--model.dropout=0.1", f"--train.steps={self.steps}", "--train.eval_interval=40",
                     "--train.eval_batches=2", "--train.threads=1"]

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
        return ok

    def ctl(self, port, action, env=None):
        r = subprocess.run([self.trident, "ctl", f"http://127.0.0.1:{port}", action], env=env or self.env,
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

    def wait_status(self, port, proc, pred, what):
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            s = status(port)
            if s is not None and pred(s):
                return s
            if proc.poll() is not None:
                break
            time.sleep(0.01)
        self.failures.append(f"{what}: not reached (last status {status(port)}, exit {proc.poll()})")
        return None

    def bad_requests(self):
        """Errors before any run: nothing listening, ports out of range, a missing --token-file."""
        port = free_port()  # nothing listens on it
        code, out = self.ctl(port, "status")
        self.check(code != 0 and f"cannot reach http://127.0.0.1:{port}: connection refused" in out and "monitor.port" in out,
                   f"ctl with nothing listening: exit {code}: {out}")
        for bad in ("99999", "abc", "0"):
            code, out = self.ctl(bad, "status")
            self.check(code != 0 and f"has port '{bad}': allowed 1-65535" in out, f"ctl to port {bad}: exit {code}: {out}")
        env = {k: v for k, v in self.env.items() if k != "TRIDENT_CONTROL_TOKEN"}
        r = subprocess.run([self.trident, "ctl", f"http://127.0.0.1:{port}", "pause", "--token-file",
                            os.path.join(self.d, "none")], env=env, capture_output=True, text=True, timeout=60)
        self.check(r.returncode != 0 and f'--token-file "{os.path.join(self.d, "none")}": cannot read a token' in r.stderr
                   and "monitor.token_file" not in r.stderr, f"ctl --token-file missing: exit {r.returncode}: {r.stderr}")

    def reference(self, ranks=0):
        run = os.path.join(self.d, f"reference{ranks}")
        code, err = self.finish(self.start(ranks, run), "reference")
        self.check(code == 0, f"reference: exit {code}\n{err[-3000:]}")
        return metrics(run)

    def one_process(self, ref):
        run = os.path.join(self.d, "paused")
        port = free_port()
        proc = self.start(0, run, [f"--monitor.port={port}"])
        if self.wait_status(port, proc, lambda s: s["step"] >= 3, "one process: step 3") is None:
            return self.finish(proc, "one process")
        code, out = self.ctl(port, "pause")
        self.check(code == 0 and '"accepted":"pause"' in out, f"ctl pause: exit {code}: {out}")
        s = self.wait_status(port, proc, lambda s: s["state"] == "paused", "one process: paused")
        if s is None:
            return self.finish(proc, "one process")
        paused_at = s["step"]
        cpu0, lines0 = cpu_seconds(proc.pid), len(metrics(run)[0])
        time.sleep(2)
        cpu1, lines1 = cpu_seconds(proc.pid), len(metrics(run)[0])
        s = status(port)
        self.check(s["state"] == "paused" and s["step"] == paused_at and lines0 == lines1 == paused_at,
                   f"paused at {paused_at}, then status {s}, metrics lines {lines0} -> {lines1}")
        self.check(cpu1 - cpu0 < 0.5, f"a paused run used {cpu1 - cpu0:.2f} CPU-seconds in 2 s (spinning?)")
        # Refused: a wrong token, no token. Nothing changes.
        code, out = self.ctl(port, "resume", dict(self.env, TRIDENT_CONTROL_TOKEN="wrong"))
        self.check(code != 0 and "401" in out, f"ctl resume with a wrong token: exit {code}: {out}")
        env = dict(self.env)
        del env["TRIDENT_CONTROL_TOKEN"]
        code, out = self.ctl(port, "stop", env)
        self.check(code != 0 and "no control token" in out, f"ctl stop without a token: exit {code}: {out}")
        time.sleep(0.5)
        s = status(port)
        self.check(s["state"] == "paused" and s["step"] == paused_at, f"after refused requests: {s}")
        # A checkpoint while paused, then resume.
        code, out = self.ctl(port, "checkpoint")
        self.check(code == 0, f"ctl checkpoint: exit {code}: {out}")
        ckpt = os.path.join(run, f"step_{paused_at:06d}")
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(ckpt, "DONE")) and time.time() < deadline:
            time.sleep(0.05)
        self.check(os.path.exists(os.path.join(ckpt, "DONE")), f"no checkpoint {ckpt} after ctl checkpoint")
        code, out = self.ctl(port, "resume")
        self.check(code == 0, f"ctl resume: exit {code}: {out}")
        code, err = self.finish(proc, "one process")
        self.check(code == 0, f"paused run: exit {code}\n{err[-3000:]}")
        self.check("paused after step" in err and "resumed at step" in err, f"no pause/resume lines:\n{err[-2000:]}")
        self.check(metrics(run) == ref, f"paused run's losses differ from the uninterrupted run's:\n"
                                        f"{metrics(run)}\nvs\n{ref}")

    def two_ranks(self):
        ref = self.reference(2)  # dropout draws per rank: 2 ranks' losses are their own
        run = os.path.join(self.d, "two")
        port = free_port(2)
        extra = [f"--monitor.port={port}"]
        proc = self.start(2, run, extra)
        if self.wait_status(port, proc, lambda s: s["step"] >= 3, "two ranks: step 3") is None:
            return self.finish(proc, "two ranks")
        for rank in (0, 1):
            text = get(f"http://127.0.0.1:{port + rank}/metrics")
            self.check(re.search(rf'^trident_loss{{job="trident",rank="{rank}"}} \S+$', text, re.M) is not None,
                       f"rank {rank}'s /metrics has no trident_loss with its labels:\n{text[:1500]}")
            self.check(re.search(rf'^trident_memory_bytes{{job="trident",rank="{rank}",device="cpu",'
                                 rf'category="parameter"}} [1-9]', text, re.M) is not None,
                       f"rank {rank}'s /metrics has no parameter bytes")
            self.check(re.search(r'^trident_comm_calls_total{.*op="all_reduce"} [1-9]', text, re.M) is not None,
                       f"rank {rank}'s /metrics has no all_reduce calls")
        self.ctl(port, "pause")
        s = self.wait_status(port, proc, lambda s: s["state"] == "paused", "two ranks: paused")
        if s is None:
            return self.finish(proc, "two ranks")
        time.sleep(1)
        steps = []
        for rank in (0, 1):
            m = re.search(r'^trident_step{[^}]*} (\S+)$', get(f"http://127.0.0.1:{port + rank}/metrics"), re.M)
            steps.append(float(m.group(1)) if m else None)
        self.check(steps == [s["step"], s["step"]], f"paused ranks at steps {steps}, rank 0 says {s['step']}")
        code, out = self.ctl(port, "stop")
        self.check(code == 0, f"ctl stop: exit {code}: {out}")
        code, err = self.finish(proc, "two ranks")
        self.check(code == STOPPED, f"stopped run: exit {code}, not {STOPPED}\n{err[-3000:]}")
        self.check(os.path.exists(os.path.join(run, f"step_{s['step']:06d}", "DONE")),
                   f"no checkpoint at step {s['step']} after ctl stop")
        code, err = self.finish(self.start(2, run, extra), "two ranks resumed")
        self.check(code == 0, f"resumed: exit {code}\n{err[-3000:]}")
        self.check(metrics(run) == ref, f"two ranks, stopped and resumed: losses differ:\n{metrics(run)}\nvs\n{ref}")


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        t = Test(trident, d)
        t.bad_requests()
        ref = t.reference()
        t.one_process(ref)
        t.two_ranks()
        return report("run control", t.failures)


if __name__ == "__main__":
    sys.exit(main())
