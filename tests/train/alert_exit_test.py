#!/usr/bin/env python3
"""Alert rules that act, and the exit statuses they end with (issue #47 items 1 and 3; Note [Exit
statuses] in src/train/stop_request.h, Note [Alert state in checkpoints] in
src/train/run_monitor.cc, Note [Rollback limits] in src/monitor/step_conditions.h).

  - config: an [[alerts]] rule with rollback_limit = 0 is refused, naming the key, with exit 78;
  - not_finite with actions log,stop: a NaN at step 20 (TRIDENT_TEST_NAN_BATCH) no longer ends
    the run with exit 1 before the rule acts; the rule stops it at the next boundary with exit 79,
    one event in alerts.jsonl, and no checkpoint holds a NaN (step 20's is not written);
  - plateau with actions log,stop, lr 1e-9 and min_delta 0.5 (no evaluation improves; one every
    2 steps, patience 3):
    fires at step 8 and exits 79, not 75 (75 tells a requeue to run it again, forever). Run
    again, the resumed rule keeps its best and its count: it fires 3 evaluations later (step 14),
    not 4 (step 16, a rule that starts afresh);
  - loss_spike -> rollback_and_skip with rollback_limit 1, on a file whose batches are random
    bytes from step 40 on: every replay spikes again, the rule rolls back further each time
    (30, then 20, then 10) and then stops with exit 80 and a message naming rollback_limit,
    instead of rolling back forever.

    alert_exit_test.py TRIDENT   (trident_with_faults: Note [Test hooks])
"""
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from runlib import alerts, prepare_corpus, tiny_args  # noqa: E402
from nan_checkpoint_test import non_finite_tensors  # noqa: E402
from spike_rollback_test import B, BLOCK, T, clean_blocks, rollbacks, write_tokens  # noqa: E402


def run(cmd, env, timeout=600):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def rule_file(d, name, body):
    path = os.path.join(d, name + ".toml")
    with open(path, "w") as f:
        f.write(body)
    return path


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures = []
    with tempfile.TemporaryDirectory() as d:
        prepare_corpus(trident, d, env)
        base = [trident, "train"] + tiny_args(d) + ["--data.sampler=sequential", "--train.checkpoint_keep=10"]

        # A config error: 78, and the message names the key and what is allowed.
        cfg = rule_file(d, "bad", '[[alerts]]\nname = "s"\ncondition = "loss_spike"\n'
                                  'actions = "rollback_and_skip"\nrollback_limit = 0\n')
        r = run(base + ["--config", cfg, f"--train.out_dir={d}/bad", "--train.steps=2"], env)
        if r.returncode != 78 or "rollback_limit" not in r.stderr:
            failures.append(f"config error: exit {r.returncode} (want 78), stderr names rollback_limit? "
                            f"{'rollback_limit' in r.stderr}\n{r.stderr[-1500:]}")

        # not_finite -> stop: the rule acts, exit 79, no NaN checkpoint.
        cfg = rule_file(d, "nan", '[[alerts]]\nname = "nan"\ncondition = "not_finite"\nactions = "log,stop"\n')
        out = os.path.join(d, "nan")
        r = run(base + ["--config", cfg, f"--train.out_dir={out}", "--train.steps=30", "--train.eval_interval=0",
                        "--train.checkpoint_interval=10"], dict(env, TRIDENT_TEST_NAN_BATCH="19"))
        if r.returncode != 79:
            failures.append(f"not_finite stop: exit {r.returncode}, want 79\n{r.stderr[-2000:]}")
        events = alerts(out)
        if [e.get("step") for e in events] != [20]:
            failures.append(f"not_finite stop: alerts.jsonl steps {[e.get('step') for e in events]}, want [20]")
        for root, _, names in os.walk(out):
            for n in names:
                if n.endswith(".safetensors") and non_finite_tensors(os.path.join(root, n)):
                    failures.append(f"not_finite stop: {os.path.relpath(os.path.join(root, n), out)} holds NaN")

        # plateau -> stop: 79, and its state survives the resume.
        cfg = rule_file(d, "plateau", '[[alerts]]\nname = "flat"\ncondition = "plateau"\npatience = 3\n'
                                      'min_delta = 0.5\nactions = "log,stop"\n')
        out = os.path.join(d, "plateau")
        cmd = base + ["--config", cfg, f"--train.out_dir={out}", "--train.steps=40", "--train.eval_interval=2",
                      "--train.eval_batches=1", "--optim.lr=1e-9",
                      "--train.checkpoint_interval=0"]
        r = run(cmd, env)
        if r.returncode != 79:
            failures.append(f"plateau stop: exit {r.returncode}, want 79\n{r.stderr[-2000:]}")
        r2 = run(cmd, env)
        steps = [e.get("step") for e in alerts(out)]
        if r2.returncode != 79 or steps != [8, 14]:
            failures.append(f"plateau resumed: exit {r2.returncode} (want 79), fired at steps {steps} "
                            f"(want [8, 14]: 3 evaluations after the resume)\n{r2.stderr[-2000:]}")

        # rollbacks bounded: 30, 30 -> 20 -> 10 with rollback_limit 1, then exit 80.
        blocks = clean_blocks(200, 0)
        rng = random.Random(5)
        for p in range(39, 200):
            blocks[p] = [10] + [rng.randrange(256) for _ in range(BLOCK - 1)]
        write_tokens(os.path.join(d, "spiky.bin"), blocks)
        cfg = rule_file(d, "spike", '[[alerts]]\nname = "spike"\ncondition = "loss_spike"\n'
                                    'actions = "log,rollback_and_skip"\nwindow = 5\nthreshold = 4.0\n'
                                    'rollback_limit = 1\nrollback_window = 1000\n')
        out = os.path.join(d, "spike")
        r = run([trident, "train", "--config", cfg, "--model.n_layer=2", "--model.n_head=2", "--model.n_embd=64",
                 f"--model.block_size={T}", "--model.vocab_size=256", "--data.tokenizer=byte",
                 f"--data.train_file={d}/spiky.bin", "--data.val_file=", "--data.sampler=sequential",
                 f"--data.batch_size={B}", f"--data.seq_len={T}", "--optim.lr=3e-3", "--train.steps=60",
                 "--train.checkpoint_interval=10", "--train.checkpoint_keep=10", "--train.threads=1",
                 f"--train.out_dir={out}"], env)
        got = rollbacks(out) if os.path.exists(os.path.join(out, "metrics.jsonl")) else []
        targets = [x["to_step"] for x in got]
        if r.returncode != 80 or "rollback_limit" not in r.stderr:
            failures.append(f"rollback limit: exit {r.returncode} (want 80 with a message naming rollback_limit), "
                            f"rollbacks {got}\n{r.stderr[-2500:]}")
        if targets != [30, 20, 10]:
            failures.append(f"rollback limit: rolled back to {targets}, want [30, 20, 10] (each once, older each time)")
    for f in failures:
        print("FAIL:", f)
    print("alert_exit:", "FAILED" if failures else "passed (78 config, 79 not_finite and plateau stops with state "
                                                   "kept over a resume, 80 after bounded rollbacks)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
