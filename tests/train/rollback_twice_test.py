#!/usr/bin/env python3
"""Two rollbacks over the same steps keep both discarded checkpoints (issue #47; Note [Rollback
and skip] in src/train/trainer_rollback.cc).

Checkpoints every 10 steps; rule loss_spike (window 5) -> rollback_and_skip. The batches at
sampler positions 39 and 49 are random bytes, so step 40 spikes, its checkpoint (finite: a
spike, not a NaN) is written, and the run rolls back to step 30 skipping 10 batches; the step 40
of the second try reads position 49 and spikes again, writes step 40's checkpoint again and
rolls back again. Before the fix the second rollback failed (exit 1) moving step_000040 onto
the first one's rolled_back/step_000040. Now each rollback has a folder of its own:
  - the run ends with status 0 after exactly two rollbacks, both from step 40 to step 30;
  - rolled_back/ holds two folders, each with a complete step_000040.

    rollback_twice_test.py TRIDENT
"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spike_rollback_test import B, BLOCK, T, clean_blocks, rollbacks, write_tokens  # noqa: E402


def main():
    trident = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        blocks = clean_blocks(120, 0)
        rng = random.Random(11)
        for position in (39, 49):
            blocks[position] = [10] + [rng.randrange(256) for _ in range(BLOCK - 1)]
        write_tokens(os.path.join(d, "train.bin"), blocks)
        with open(os.path.join(d, "rule.toml"), "w") as f:
            f.write('[[alerts]]\nname = "spike"\ncondition = "loss_spike"\nactions = "log,rollback_and_skip"\n'
                    'window = 5\nthreshold = 8.0\n')
        run = os.path.join(d, "run")
        cmd = [trident, "train", "--config", os.path.join(d, "rule.toml"), "--model.n_layer=2", "--model.n_head=2",
               "--model.n_embd=64", f"--model.block_size={T}", "--model.vocab_size=256", "--data.tokenizer=byte",
               f"--data.train_file={d}/train.bin", "--data.val_file=", "--data.sampler=sequential",
               f"--data.batch_size={B}", f"--data.seq_len={T}", "--optim.lr=3e-3", "--train.steps=50",
               "--train.checkpoint_interval=10", "--train.checkpoint_keep=10", "--train.threads=1",
               f"--train.out_dir={run}"]
        r = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            failures.append(f"exit {r.returncode}\n{r.stderr[-3000:]}")
        if os.path.exists(os.path.join(run, "metrics.jsonl")):
            got = rollbacks(run)
            if got != [{"from_step": 40, "to_step": 30}] * 2:
                failures.append(f"rollbacks {got}, want two from step 40 to step 30")
        aside = os.path.join(run, "rolled_back")
        folders = sorted(os.listdir(aside)) if os.path.isdir(aside) else []
        kept = [f for f in folders if os.path.isfile(os.path.join(aside, f, "step_000040", "manifest.json"))]
        if len(kept) != 2:
            failures.append(f"rolled_back/ holds {folders}; want two folders, each with step_000040 "
                            f"(complete: {kept})")
    for f in failures:
        print("FAIL:", f)
    print("rollback_twice:", "FAILED" if failures else "passed (two rollbacks over step 40, both kept)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
