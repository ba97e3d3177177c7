#!/usr/bin/env python3
"""Run folders are consistent (issue #47 item 5).

1. Resume after a crash: a run of 12 steps (checkpoints at 5, 10, 12) whose checkpoints after
   step 5 are then removed and whose metrics.jsonl gets a torn last line, as a run killed after
   step 12 leaves it. Resumed, its metrics.jsonl holds every step and evaluation exactly once, in
   order, equal to the uninterrupted run's lines but for timing fields (the replayed steps 6..12
   are bit-identical), and `trident report` writes a report (before, the torn line and the
   resumed run's first line made one malformed line and the report refused the run). A run that
   starts afresh (train.resume = false) keeps no stale run's lines.
2. Two runs on one out_dir: the second exits 1 at once with a message naming the holder (pid
   and host), the first's metrics untouched; after the first is killed with SIGKILL a third run
   takes the directory (the lock dies with its process).
3. A prepare that fails while writing (a file-size limit that the new train.bin passes and the
   new val.bin does not) leaves the old train.bin and val.bin as they were; a prepare that
   succeeds leaves no temporary file or marker. A pair whose publication was cut between its
   two renames (the marker prepare.pending still there) is refused by a run, naming the marker.

    run_folder_test.py TRIDENT
"""
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import prepare_corpus, report, tiny_args  # noqa: E402

TIMING = {"elapsed_s", "step_s", "data_s", "forward_backward_s", "comm_wait_s", "optimizer_s", "tokens_per_s", "mfu",
          "memory_bytes", "memory_peak_bytes"}


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def untimed(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def train(trident, d, run, env, extra=(), **kw):
    return subprocess.run([trident, "train"] + tiny_args(d) + ["--train.eval_interval=4", "--train.eval_batches=1",
                                                               "--train.checkpoint_interval=5",
                                                               f"--train.out_dir={run}"] + list(extra),
                          env=env, capture_output=True, text=True, timeout=300, **kw)


def resume_after_crash(trident, d, env, failures):
    run = os.path.join(d, "resume")
    r = train(trident, d, run, env, ["--train.steps=12"])
    if r.returncode != 0:
        return failures.append(f"first run: exit {r.returncode}\n{r.stderr[-2000:]}")
    whole = lines(os.path.join(run, "metrics.jsonl"))
    # Killed after step 12: the checkpoints after step 5 never completed, the last line cut.
    for name in os.listdir(run):
        if re.fullmatch(r"step_\d+", name) and int(name[5:]) > 5:
            shutil.rmtree(os.path.join(run, name))
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write('{"step": 13, "loss": 2.71')
    r = train(trident, d, run, env, ["--train.steps=12", "--train.resume=true"])
    if r.returncode != 0:
        return failures.append(f"resumed run: exit {r.returncode}\n{r.stderr[-2000:]}")
    r = subprocess.run([trident, "report", run], capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or not os.path.exists(os.path.join(run, "report.html")):
        failures.append(f"report after a resume over a torn line: exit {r.returncode}\n{r.stderr[-1000:]}")
    try:
        resumed = lines(os.path.join(run, "metrics.jsonl"))
    except json.JSONDecodeError as e:
        return failures.append(f"resumed metrics.jsonl is not JSON lines: {e}")
    steps = [x["step"] for x in resumed if "loss" in x]
    if steps != list(range(1, 13)):
        failures.append(f"resumed metrics.jsonl: steps {steps}, want each of 1..12 once")
    if untimed(resumed) != untimed(whole):
        diff = [(a, b) for a, b in zip(untimed(resumed), untimed(whole)) if a != b][:2]
        failures.append(f"resumed metrics.jsonl differs from the uninterrupted run's ({len(resumed)} lines vs "
                        f"{len(whole)}): first differences {diff}")
    # A fresh run in the same directory: no stale lines.
    r = train(trident, d, run, env, ["--train.steps=3", "--train.resume=false"])
    fresh = lines(os.path.join(run, "metrics.jsonl")) if r.returncode == 0 else []
    if r.returncode != 0 or [x["step"] for x in fresh if "loss" in x] != [1, 2, 3]:
        failures.append(f"fresh run over an old one: exit {r.returncode}, steps "
                        f"{[x.get('step') for x in fresh]}\n{r.stderr[-1000:]}")


def two_runs(trident, d, env, failures):
    run = os.path.join(d, "shared")
    first = subprocess.Popen([trident, "train"] + tiny_args(d) + ["--train.steps=100000", "--train.eval_interval=0",
                                                                  "--train.checkpoint_interval=0",
                                                                  f"--train.out_dir={run}"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        metrics = os.path.join(run, "metrics.jsonl")
        deadline = time.time() + 120
        while time.time() < deadline and first.poll() is None and \
                not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
            time.sleep(0.1)
        if first.poll() is not None or not os.path.exists(metrics):
            return failures.append(f"first run did not start: exit {first.poll()}")
        r = train(trident, d, run, env, ["--train.steps=2"])
        before = os.path.getsize(metrics)
        host = socket.gethostname()
        if r.returncode != 1 or "in use by another run" not in r.stderr or f"pid {first.pid} on host {host}" \
                not in r.stderr:
            failures.append(f"second run on one out_dir: exit {r.returncode}, want 1 and a message naming pid "
                            f"{first.pid} on host {host}: {r.stderr[-1500:]}")
        time.sleep(0.5)
        if first.poll() is not None or os.path.getsize(metrics) < before:
            failures.append(f"the first run was disturbed: exit {first.poll()}")
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    r = train(trident, d, run, env, ["--train.steps=2", "--train.resume=false"])
    if r.returncode != 0:
        failures.append(f"a run after the holder was killed -9: exit {r.returncode}\n{r.stderr[-1500:]}")


def prepare_killed(trident, d, env, failures):
    out = os.path.join(d, "pair")
    old_text, new_text = os.path.join(d, "old.txt"), os.path.join(d, "new.txt")
    with open(old_text, "w") as f:
        f.write("the old corpus. " * 100)
    with open(new_text, "w") as f:
        f.write("a new and longer corpus! " * 800)  # 20,000 bytes: train 4,000 tokens, val 16,000
    r = subprocess.run([trident, "prepare", "--out", out, "--tokenizer", "byte", "--val-fraction", "0.8", old_text],
                       env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return failures.append(f"prepare: exit {r.returncode}: {r.stderr}")
    old = {n: open(os.path.join(out, n), "rb").read() for n in ("train.bin", "val.bin")}

    def limit():  # the new train.bin (8,000 bytes) fits, the new val.bin (32,000) does not
        resource.setrlimit(resource.RLIMIT_FSIZE, (16000, 16000))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    r = subprocess.run([trident, "prepare", "--out", out, "--tokenizer", "byte", "--val-fraction", "0.8", new_text],
                       env=env, capture_output=True, text=True, timeout=60, preexec_fn=limit)
    now = {n: open(os.path.join(out, n), "rb").read() for n in ("train.bin", "val.bin")}
    if r.returncode == 0 or now != old:
        failures.append(f"prepare failing on val.bin: exit {r.returncode}, train.bin kept {now['train.bin'] == old['train.bin']}, "
                        f"val.bin kept {now['val.bin'] == old['val.bin']}: {r.stderr[-500:]}")
    r = subprocess.run([trident, "prepare", "--out", out, "--tokenizer", "byte", "--val-fraction", "0.8", new_text],
                       env=env, capture_output=True, text=True, timeout=60)
    left = sorted(os.listdir(out))
    if r.returncode != 0 or left != ["train.bin", "val.bin"] or os.path.getsize(os.path.join(out, "val.bin")) != 32000:
        failures.append(f"prepare after the failure: exit {r.returncode}, files {left}: {r.stderr[-500:]}")
    # A publication cut between its two renames (val.bin new, train.bin still old): a run refuses
    # the pair, naming the marker; the next prepare finishes the publication first.
    shutil.copy(os.path.join(out, "train.bin"), os.path.join(out, "train.bin.new"))
    with open(os.path.join(out, "train.bin"), "wb") as f:
        f.write(old["train.bin"])
    with open(os.path.join(out, "prepare.pending"), "w") as f:
        f.write("val\n")
    r = train(trident, d, os.path.join(d, "pending_run"), env,
              [f"--data.train_file={out}/train.bin", f"--data.val_file={out}/val.bin", "--train.steps=1"])
    if r.returncode == 0 or "prepare.pending" not in r.stderr or "data.train_file" not in r.stderr:
        failures.append(f"a run on a half-published pair: exit {r.returncode}: {r.stderr[-500:]}")
    r = subprocess.run([trident, "prepare", "--out", out, "--tokenizer", "byte", "--val-fraction", "0.8", new_text],
                       env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or sorted(os.listdir(out)) != ["train.bin", "val.bin"]:
        failures.append(f"prepare after a cut publication: exit {r.returncode}, files {sorted(os.listdir(out))}")


def main():
    trident = sys.argv[1]
    failures = []
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as d:
        prepare_corpus(trident, d, env)
        prepare_killed(trident, d, env, failures)
        resume_after_crash(trident, d, env, failures)
        two_runs(trident, d, env, failures)
    return report("run_folder", failures)


if __name__ == "__main__":
    sys.exit(main())
