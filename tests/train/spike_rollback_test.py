#!/usr/bin/env python3
"""The per-step alert rules and rollback_and_skip end to end (issue #23; Note [Rollback and
skip] in src/train/trainer_rollback.cc).

The training file is made of 256-token blocks, one per batch (batch_size 4 x seq_len 64,
sequential sampler), each starting with a newline, so step k trains on block k - 1 and cutting
whole blocks out of the file leaves every other batch as it was. Step BAD = 35 is made bad two
ways: an injected NaN (TRIDENT_TEST_NAN_BATCH, Note [NaN test hook]) or a poisoned block of
random bytes (a real loss spike). Checkpoints every 10 steps, so the newest one before BAD is
at GOOD = 30 and rollback_and_skip skips the batches of steps 31..35.

  - the reference: the same run on the file with blocks 30..34 cut out (a sampler that never
    saw those batches), no alert rules;
  - NaN, rule not_finite with log, notify (a local webhook) and rollback_and_skip: fires once
    at step 35 (one line in alerts.jsonl, one webhook event), rolls back to step 30, and the
    run finishes with the reference's losses bit for bit (the last line of each step);
  - spike, rule loss_spike with log, notify (a command: the event's JSON on its stdin) and
    checkpoint: fires once at step 35, the command gets the event, a checkpoint of step 35 is
    written, the run finishes;
  - spike, rule loss_spike with rollback_and_skip: fires once, the reference's losses;
  - `trident launch -n 2`, data parallel, ZeRO-3, tensor and pipeline parallel: the NaN
    rollback on 2 ranks equals that layout's 2-rank reference.

    spike_rollback_test.py TRIDENT
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import alerts, report, start_webhook  # noqa: E402

TIMEOUT = 300
B, T = 4, 64
BLOCK = B * T
STEPS, BAD, GOOD = 60, 35, 30
LAYOUTS = [("dp", []), ("zero3", ["--parallel.zero_stage=3"]), ("tp", ["--parallel.tp=2"]),
           ("pp", ["--parallel.pp=2"])]


def clean_blocks(n, salt):
    text = "".join(f"line {i % 37} says {'abc'[i % 3] * (1 + i % 5)} and {i % 11}.\n" for i in range(salt, salt + 4000))
    data = text.encode()
    return [[10] + list(data[k * (BLOCK - 1):(k + 1) * (BLOCK - 1)]) for k in range(n)]


def write_tokens(path, blocks):
    with open(path, "wb") as f:
        for b in blocks:
            assert len(b) == BLOCK
            f.write(struct.pack(f"<{BLOCK}H", *b))


def losses_by_step(run_dir):
    """The last logged loss of each step (a rollback logs the re-trained steps again)."""
    last = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "loss" in r:
                last[r["step"]] = r["loss"]
    return [last[s] for s in sorted(last)]


def rollbacks(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line)["rollback"] for line in f if '"rollback"' in line]


class Test:
    def __init__(self, trident, d):
        self.trident, self.d, self.failures = trident, d, []
        self.env = dict(os.environ, OMP_NUM_THREADS="1")
        blocks = clean_blocks(120, 0)
        rng = random.Random(7)
        poisoned = list(blocks)
        poisoned[BAD - 1] = [10] + [rng.randrange(256) for _ in range(BLOCK - 1)]
        write_tokens(os.path.join(d, "clean.bin"), blocks)
        write_tokens(os.path.join(d, "poisoned.bin"), poisoned)
        write_tokens(os.path.join(d, "cut.bin"), blocks[:GOOD] + blocks[BAD:])
        write_tokens(os.path.join(d, "val.bin"), clean_blocks(8, 1000))
        self.hook = start_webhook()

    def config(self, name, body):
        path = os.path.join(self.d, name + ".toml")
        with open(path, "w") as f:
            f.write(body)
        return path

    def rule(self, name, condition, actions, command=""):
        return self.config(name, f"""
[[alerts]]
name = "{name}"
condition = "{condition}"
actions = "{actions}"
window = 10
threshold = 8.0
webhook = "{self.hook.url}"
command = "{command}"
""")

    def train(self, what, data, config, ranks=0, env=None, extra=()):
        run = os.path.join(self.d, what)
        cmd = ["train", "--config", config, "--model.n_layer=2", "--model.n_head=2", "--model.n_embd=64",
               f"--model.block_size={T}", "--model.vocab_size=256", "--data.tokenizer=byte",
               f"--data.train_file={self.d}/{data}", f"--data.val_file={self.d}/val.bin", "--data.sampler=sequential",
               f"--data.batch_size={B}", f"--data.seq_len={T}", "--optim.lr=3e-3", f"--train.steps={STEPS}",
               "--train.eval_interval=20", "--train.eval_batches=2", "--train.checkpoint_interval=10",
               "--train.checkpoint_keep=10", "--train.threads=1", f"--train.out_dir={run}"] + list(extra)
        cmd = [self.trident] + cmd if ranks == 0 else [self.trident, "launch", "-n", str(ranks), "--"] + cmd
        r = subprocess.run(cmd, env=dict(self.env, **(env or {})), capture_output=True, text=True, timeout=TIMEOUT)
        if r.returncode != 0:
            self.failures.append(f"{what}: exit {r.returncode}\n{r.stderr[-3000:]}")
        return run, r

    def fired_once(self, what, run, condition):
        ev = alerts(run)
        ok = len(ev) == 1 and ev[0]["condition"] == condition and ev[0]["step"] == BAD
        if not ok:
            self.failures.append(f"{what}: alerts.jsonl {ev}, want one {condition} event at step {BAD}")
        return ok

    def rolled_back_like(self, what, run, r, ref):
        if f"rolled back from step {BAD} to the checkpoint of step {GOOD}" not in r.stderr:
            self.failures.append(f"{what}: no rollback line:\n{r.stderr[-2000:]}")
        if rollbacks(run) != [{"from_step": BAD, "to_step": GOOD}]:
            self.failures.append(f"{what}: rollback lines {rollbacks(run)}")
        got = losses_by_step(run)
        if len(got) != STEPS or got != ref:
            diff = [(i + 1, a, b) for i, (a, b) in enumerate(zip(got, ref)) if a != b][:5]
            self.failures.append(f"{what}: losses differ from the run that never saw steps {GOOD + 1}..{BAD}'s "
                                 f"batches ({len(got)} vs {len(ref)} steps; first differences {diff})")

    def run(self):
        none = self.config("none", "alerts = []\n")
        ref_dir, _ = self.train("reference", "cut.bin", none)
        ref = losses_by_step(ref_dir)
        # NaN -> not_finite -> log, notify, rollback_and_skip.
        nan_rule = self.rule("nan", "not_finite", "log,notify,rollback_and_skip")
        run, r = self.train("nan", "clean.bin", nan_rule, env={"TRIDENT_TEST_NAN_BATCH": str(BAD - 1)})
        self.fired_once("nan", run, "not_finite")
        if "alert 'nan' (not_finite) at step 35" not in r.stderr:
            self.failures.append(f"nan: no log line:\n{r.stderr[-2000:]}")
        hooked = [e for e in (json.loads(body) for _, body in self.hook.events) if e["rule"] == "nan"]
        if len(hooked) != 1 or hooked[0]["step"] != BAD or hooked[0]["value"] is not None:
            self.failures.append(f"nan: webhook events {hooked}, want one at step {BAD} with value null (NaN)")
        self.rolled_back_like("nan", run, r, ref)
        # A real spike (random bytes) -> loss_spike -> log, checkpoint.
        event_file = os.path.join(self.d, "event.json")
        run, r = self.train("spike", "poisoned.bin", self.rule("spike", "loss_spike", "log,notify,checkpoint",
                                                               command=f"cat > {event_file}"))
        try:
            with open(event_file) as f:
                got = json.load(f)
        except (OSError, ValueError) as e:
            got = e
        if not alerts(run) or got != alerts(run)[0]:
            self.failures.append(f"spike: the notify command's stdin {got} is not the event {alerts(run)}")
        if self.fired_once("spike", run, "loss_spike"):
            e = alerts(run)[0]
            if not e["value"] > e["baseline"] + 1:
                self.failures.append(f"spike: event {e}")
        if not os.path.exists(os.path.join(run, f"step_{BAD:06d}", "DONE")):
            self.failures.append(f"spike: no checkpoint step_{BAD:06d} after the alert")
        if rollbacks(run):
            self.failures.append("spike: rolled back without rollback_and_skip")
        # The spike rolled back.
        run, r = self.train("spike_rollback", "poisoned.bin",
                            self.rule("spike_rb", "loss_spike", "log,rollback_and_skip"))
        self.fired_once("spike rollback", run, "loss_spike")
        self.rolled_back_like("spike rollback", run, r, ref)
        # Two ranks, each layout's checkpoints (replicated, ZeRO-3 shards, tensor- and
        # pipeline-parallel boxes): every rank rolls back at the same step.
        for name, layout in LAYOUTS:
            ref2_dir, _ = self.train(f"reference2_{name}", "cut.bin", none, ranks=2, extra=layout)
            run, r = self.train(f"nan2_{name}", "clean.bin", nan_rule, ranks=2,
                                env={"TRIDENT_TEST_NAN_BATCH": str(BAD - 1)}, extra=layout)
            self.fired_once(f"nan 2 ranks {name}", run, "not_finite")
            self.rolled_back_like(f"nan 2 ranks {name}", run, r, losses_by_step(ref2_dir))
        self.hook.shutdown()


def main():
    with tempfile.TemporaryDirectory() as d:
        t = Test(sys.argv[1], d)
        t.run()
    return report("spike_rollback", t.failures)


if __name__ == "__main__":
    sys.exit(main())
