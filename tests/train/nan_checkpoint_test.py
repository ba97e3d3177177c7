#!/usr/bin/env python3
"""No checkpoint is ever written from non-finite state (issue #47; Note [No checkpoint from
non-finite state] in src/train/trainer_checkpoint.cc).

A NaN is injected into the batch of step 20 (TRIDENT_TEST_NAN_BATCH), which is also a periodic
checkpoint step (train.checkpoint_interval = 10). The rule not_finite -> rollback_and_skip lets
the run go on to the next boundary, so before the fix the checkpoint of step 20 was written with
NaN weights: it became the newest, and the rollback moved it aside (rolled_back/). Now:
  - the run ends with status 0 and says it did not write step 20's checkpoint, naming a tensor;
  - no checkpoint anywhere under out_dir (rolled_back/ included) holds a NaN or an infinity;
  - the rollback went to step 10's checkpoint;
on 1 rank and, through `trident launch -n 2`, with data parallelism and ZeRO-3 (the ranks agree).

    nan_checkpoint_test.py TRIDENT
"""
import array
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import prepare_corpus, tiny_args  # noqa: E402

NAN_STEP = 20


def non_finite_tensors(path):
    """Names of the F32/BF16/F16 tensors in a safetensors file with a NaN or an infinity."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    bad = []
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        raw = data[lo:hi]
        if t["dtype"] == "F32":
            values = array.array("f", raw)
        elif t["dtype"] == "BF16":
            values = array.array("f", b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2)))
        elif t["dtype"] == "F16":
            values = [struct.unpack("<e", raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
        else:
            continue
        if any(not math.isfinite(v) for v in values):
            bad.append(name)
    return bad


def check_run(trident, d, what, ranks, extra, env):
    out = os.path.join(d, what)
    cmd = ["train"] + tiny_args(d) + [
        "--data.sampler=sequential", "--optim.lr=3e-3", "--train.steps=30", "--train.eval_interval=0",
        "--train.checkpoint_interval=10", "--train.checkpoint_keep=10", f"--train.out_dir={out}",
        "--config", os.path.join(d, "nan_rule.toml")] + extra
    cmd = [trident] + cmd if ranks == 1 else [trident, "launch", "-n", str(ranks), "--"] + cmd
    r = subprocess.run(cmd, env=dict(env, TRIDENT_TEST_NAN_BATCH=str(NAN_STEP - 1)), capture_output=True,
                       text=True, timeout=600)
    failures = []
    if r.returncode != 0:
        failures.append(f"{what}: exit {r.returncode}\n{r.stderr[-3000:]}")
    if f"not writing the checkpoint of step {NAN_STEP}: '" not in r.stderr:
        failures.append(f"{what}: no line saying the checkpoint of step {NAN_STEP} was not written:\n{r.stderr[-3000:]}")
    if f"rolled back from step {NAN_STEP} to the checkpoint of step 10" not in r.stderr:
        failures.append(f"{what}: no rollback to step 10:\n{r.stderr[-3000:]}")
    files = 0
    for root, _, names in os.walk(out):
        for name in names:
            if name.endswith(".safetensors"):
                files += 1
                bad = non_finite_tensors(os.path.join(root, name))
                if bad:
                    failures.append(f"{what}: {os.path.relpath(os.path.join(root, name), out)} holds non-finite "
                                    f"values in {bad[:4]}")
    if files == 0:
        failures.append(f"{what}: no checkpoint files at all under {out}")
    return failures


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures = []
    with tempfile.TemporaryDirectory() as d:
        prepare_corpus(trident, d, env)
        with open(os.path.join(d, "nan_rule.toml"), "w") as f:
            f.write('[[alerts]]\nname = "nan"\ncondition = "not_finite"\nactions = "log,rollback_and_skip"\n')
        failures += check_run(trident, d, "one_rank", 1, [], env)
        failures += check_run(trident, d, "dp2", 2, [], env)
        failures += check_run(trident, d, "zero3", 2, ["--parallel.zero_stage=3"], env)
    for f in failures:
        print("FAIL:", f)
    print("nan_checkpoint:", "FAILED" if failures else "passed (1 rank, 2-rank DP, 2-rank ZeRO-3)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
