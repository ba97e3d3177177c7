#!/usr/bin/env python3
"""`trident train --train.device=cuda` reaches the CUDA backend in a CUDA build (issue #21: the
CLI once linked without it, so on a GPU machine it said "this build has no CUDA backend").
Registered only for builds with TRIDENT_CUDA. With a GPU the tiny run trains and writes its
losses; without one it fails naming the missing device, not a missing backend.

    cli_cuda_test.py TRIDENT
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="trident_cli_cuda_test_") as d:
        text = os.path.join(d, "text.txt")
        with open(text, "w") as f:
            f.writelines(f"line {i % 37} of a small corpus, {i % 11}.\n" for i in range(1500))
        data = os.path.join(d, "data")
        p = subprocess.run([trident, "prepare", "--out", data, "--tokenizer", "byte", text], capture_output=True,
                           text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        out_dir = os.path.join(d, "run")
        p = subprocess.run([trident, "train", "--train.device=cuda", "--model.n_layer=2", "--model.n_head=2",
                            "--model.n_embd=32", "--model.block_size=32", "--model.vocab_size=256",
                            "--data.tokenizer=byte", f"--data.train_file={data}/train.bin",
                            f"--data.val_file={data}/val.bin", "--data.batch_size=4", "--data.seq_len=32",
                            "--train.steps=3", "--train.eval_interval=0", "--train.eval_batches=1",
                            f"--train.out_dir={out_dir}"], capture_output=True, text=True, env=env, timeout=300)
        if "no CUDA backend" in p.stderr:
            sys.exit(f"FAIL: the CLI was built without the CUDA backend:\n{p.stderr[-1500:]}")
        if p.returncode == 0:
            with open(os.path.join(out_dir, "metrics.jsonl")) as f:
                losses = [json.loads(line)["loss"] for line in f if '"loss"' in line]
            if len(losses) != 3:
                sys.exit(f"FAIL: expected 3 step losses on the GPU, got {losses}")
            print(f"trained on the GPU: losses {losses}")
        elif "no CUDA device" in p.stderr:
            print("no GPU here: the CUDA backend is linked and says so:", p.stderr.strip().splitlines()[-1])
        else:
            sys.exit(f"FAIL: exit {p.returncode}, neither trained nor named the missing GPU:\n{p.stderr[-1500:]}")


if __name__ == "__main__":
    main()
