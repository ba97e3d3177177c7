#!/usr/bin/env python3
"""`sample` and `eval` read Hugging Face model directories as they read checkpoints (issue #22
item 5), and `train --train.init_from=DIR` fine-tunes from one:

  - a tiny LLaMA (GQA, a sliding window) trains a few steps on bytes and is exported with
    `trident export --out DIR`;
  - `sample` from the checkpoint and from the directory, same seed: the same text;
  - `eval --val-file` of the checkpoint and of the directory: the same loss;
  - `train --train.init_from=DIR` starts from the directory (its architecture, its weights: the
    first loss equals the model's loss on that batch, below a fresh model's) and trains on;
  - a directory without tokenizer files needs --tokenizer, and eval of a directory needs
    --val-file: errors saying so.
  - export into the checkpoint it reads (the step directory, with a trailing slash, through a
    symlink, a file inside it) is refused before writing, naming both paths: the checkpoint
    still evaluates; --max-shard-mb inf is refused naming the flag.
  - eval's --batches, --batch-size and --seq-len refuse 0, and --seq-len past block_size, a
    --batch-size past 2^53 tokens and a missing --val-file are named as those flags; sample
    --temperature nan names its flag, and a tokenizer far smaller than the model's vocabulary
    gets a warning.
  - a checkpoint directory without DONE (an interrupted write) is refused as incomplete by eval,
    sample and export, not read as a model directory; in a run directory the newer incomplete
    one is named when the complete one before it is used.

    cli_hf_dir_test.py TRIDENT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import metrics, prepare_corpus  # noqa: E402


def run(cmd, cwd, env):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace", timeout=300)


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
        print(("ok   " if ok else "FAIL ") + what)

    with tempfile.TemporaryDirectory(prefix="trident_cli_hf_dir_test_") as d:
        prepare_corpus(trident, d, env)
        data = os.path.join(d, "data")
        model = ["--model.arch=llama", "--model.n_layer=2", "--model.n_head=4", "--model.n_kv_heads=2",
                 "--model.n_embd=32", "--model.intermediate_size=64", "--model.block_size=32",
                 "--model.vocab_size=256", "--model.sliding_window=12", "--model.dropout=0"]
        common = ["--data.tokenizer=byte", f"--data.train_file={data}/train.bin", f"--data.val_file={data}/val.bin",
                  "--data.batch_size=4", "--data.seq_len=32", "--train.eval_interval=0", "--train.threads=1",
                  "--optim.lr=3e-3", "--lr_schedule.warmup_steps=0"]
        base = os.path.join(d, "base")
        p = run([trident, "train"] + model + common + ["--train.steps=12", f"--train.out_dir={base}"], d, env)
        assert p.returncode == 0, p.stderr
        hf = os.path.join(d, "exports", "hf")  # parents are made as needed
        p = run([trident, "export", "--checkpoint", base, "--out", hf], d, env)
        check(p.returncode == 0, f"export into a new directory under a new one: {p.stderr[-300:]}")
        single = os.path.join(d, "more", "model.safetensors")
        p = run([trident, "export", "--checkpoint", base, "--out", single], d, env)
        check(p.returncode == 0 and os.path.exists(single), f"export of one file under a new directory: {p.stderr[-300:]}")
        with open(os.path.join(hf, "config.json")) as f:
            config = json.load(f)
        check(config.get("model_type") == "mistral" and config.get("sliding_window") == 12,
              f"the export is a Mistral with its window: {config.get('model_type')}, {config.get('sliding_window')}")

        sample = ["--prompt", "line 7 says", "--tokens", "40", "--seed", "5", "--temperature", "0.9"]
        from_ckpt = run([trident, "sample", "--checkpoint", base] + sample, d, env)
        from_hf = run([trident, "sample", "--checkpoint", hf, "--tokenizer", "byte"] + sample, d, env)
        check(from_ckpt.returncode == 0 and from_hf.returncode == 0 and from_ckpt.stdout == from_hf.stdout
              and len(from_hf.stdout) > len("line 7 says"),
              f"sample: the checkpoint and the directory give the same text {from_hf.stdout!r} "
              f"({from_ckpt.stderr[-300:]}{from_hf.stderr[-300:]})")

        ev = ["--val-file", f"{data}/val.bin", "--batches", "3", "--batch-size", "4", "--seq-len", "32"]
        e1 = run([trident, "eval", "--checkpoint", base] + ev, d, env)
        e2 = run([trident, "eval", "--checkpoint", hf] + ev, d, env)
        ok = e1.returncode == 0 and e2.returncode == 0
        v1 = json.loads(e1.stdout)["val_loss"] if ok else None
        v2 = json.loads(e2.stdout)["val_loss"] if ok else None
        check(ok and v1 == v2, f"eval: the checkpoint and the directory give the same loss {v1} / {v2} "
              f"({e1.stderr[-300:]}{e2.stderr[-300:]})")

        # Fine-tuning from the directory: its architecture, its weights.
        tuned = os.path.join(d, "tuned")
        fresh = os.path.join(d, "fresh")
        args = common + ["--train.steps=6", "--optim.lr=1e-3"]
        p = run([trident, "train"] + args + [f"--train.init_from={hf}", f"--train.out_dir={tuned}"], d, env)
        check(p.returncode == 0 and "arch = \"llama\"" in p.stdout and "sliding_window = 12" in p.stdout,
              f"train --train.init_from=DIR prints the directory's architecture ({p.stderr[-300:]})")
        p = run([trident, "train"] + model + args + [f"--train.out_dir={fresh}"], d, env)
        assert p.returncode == 0, p.stderr
        lt, lf = metrics(tuned)[0], metrics(fresh)[0]
        check(len(lt) == 6 and lt[0] < lf[0] - 0.5 and lt[-1] < lt[0],
              f"fine-tuning starts from the trained weights and trains on: {lt[0]:.3f} vs fresh {lf[0]:.3f}, "
              f"last {lt[-1]:.3f}")

        # Clear errors.
        p = run([trident, "sample", "--checkpoint", hf] + sample, d, env)
        check(p.returncode != 0 and hf in p.stderr and "--tokenizer" in p.stderr,
              f"a directory without tokenizer files: {p.stderr.strip()[-300:]}")
        p = run([trident, "eval", "--checkpoint", hf], d, env)
        check(p.returncode != 0 and "needs --val-file" in p.stderr, f"eval of a directory: {p.stderr.strip()[-200:]}")
        p = run([trident, "sample", "--checkpoint", os.path.join(d, "nothing")], d, env)
        check(p.returncode != 0 and "nothing" in p.stderr and "config.json" in p.stderr,
              f"neither a checkpoint nor a directory: {p.stderr.strip()[-300:]}")

        # Export into the checkpoint it reads: refused before anything is written.
        last = sorted(n for n in os.listdir(base) if n.startswith("step_"))[-1]
        step = os.path.join(base, last)
        os.symlink(step, os.path.join(d, "link"))
        for out in (step, step + "/", os.path.join(step, "model.safetensors"), os.path.join(d, "link"),
                    os.path.join(base, "..", "base", last, "sub", "w.safetensors")):
            p = run([trident, "export", "--checkpoint", base, "--out", out], d, env)
            check(p.returncode != 0 and f"--out '{out}'" in p.stderr and "the checkpoint it reads" in p.stderr
                  and step in p.stderr, f"export --out {out} into the checkpoint: {p.stderr.strip()[-300:]}")
        e3 = run([trident, "eval", "--checkpoint", base] + ev, d, env)
        check(e3.returncode == 0 and json.loads(e3.stdout)["val_loss"] == v1,
              f"the checkpoint is intact after the refused exports: {e3.stdout.strip()} {e3.stderr[-300:]}")
        for value in ("inf", "1e30", "0"):
            p = run([trident, "export", "--checkpoint", base, "--out", os.path.join(d, "shards"),
                     "--max-shard-mb", value], d, env)
            check(p.returncode != 0 and f"--max-shard-mb: Value {value} is not allowed" in p.stderr,
                  f"export --max-shard-mb {value}: {p.stderr.strip()[-300:]}")

        # Flags named in their errors.
        for flag in ("--batches", "--batch-size", "--seq-len"):
            p = run([trident, "eval", "--checkpoint", base, flag, "0"], d, env)
            check(p.returncode != 0 and f"{flag}: Value 0 is not allowed: must be > 0" in p.stderr,
                  f"eval {flag} 0: {p.stderr.strip()[-300:]}")
        p = run([trident, "eval", "--checkpoint", base, "--seq-len", "64"], d, env)
        check(p.returncode != 0 and "--seq-len 64 exceeds the model's block_size 32" in p.stderr,
              f"eval --seq-len past block_size: {p.stderr.strip()[-300:]}")
        p = run([trident, "eval", "--checkpoint", base, "--batch-size", str(2**60)], d, env)
        check(p.returncode != 0 and f"eval: --batch-size {2**60} x the checkpoint's data.seq_len" in p.stderr
              and "at most 2^53 tokens per batch" in p.stderr, f"eval --batch-size 2^60: {p.stderr.strip()[-300:]}")
        p = run([trident, "eval", "--checkpoint", base, "--val-file", os.path.join(d, "none.bin")], d, env)
        check(p.returncode != 0 and "--val-file" in p.stderr and "none.bin' does not exist" in p.stderr,
              f"eval --val-file missing: {p.stderr.strip()[-300:]}")
        p = run([trident, "sample", "--checkpoint", base, "--temperature", "nan"], d, env)
        check(p.returncode != 0 and "--temperature: Value nan is not a number" in p.stderr,
              f"sample --temperature nan: {p.stderr.strip()[-300:]}")
        wide = os.path.join(d, "wide")  # vocab_size 2048 on bytes: ids 256 and up decode to nothing
        p = run([trident, "train", "--model.n_layer=1", "--model.n_head=2", "--model.n_embd=16",
                 "--model.block_size=32", "--model.vocab_size=2048"] + common +
                ["--train.steps=1", f"--train.out_dir={wide}"], d, env)
        assert p.returncode == 0, p.stderr
        p = run([trident, "sample", "--checkpoint", wide, "--tokens", "50", "--temperature", "5"], d, env)
        check("warning: the tokenizer bytes has 256 ids, the model's vocab_size is 2048" in p.stderr,
              f"sample with a tokenizer far smaller than the model's vocabulary should warn: {p.stderr.strip()[-300:]}")

        # A checkpoint without its DONE marker is incomplete.
        partial = os.path.join(d, "partial")
        shutil.copytree(step, partial)
        os.remove(os.path.join(partial, "DONE"))
        for cmd in (["eval", "--val-file", f"{data}/val.bin"], ["sample", "--tokens", "4"],
                    ["export", "--out", os.path.join(d, "partial_hf")]):
            p = run([trident, cmd[0], "--checkpoint", partial] + cmd[1:], d, env)
            check(p.returncode != 0 and f"checkpoint '{partial}' is incomplete: it has no DONE marker" in p.stderr,
                  f"{cmd[0]} of a checkpoint without DONE: {p.stderr.strip()[-300:]}")
        newer = "step_%06d" % (int(last[len("step_"):]) + 1)
        shutil.copytree(partial, os.path.join(base, newer))
        p = run([trident, "eval", "--checkpoint", base] + ev, d, env)
        check(p.returncode == 0 and json.loads(p.stdout)["val_loss"] == v1 and
              f"skipped the newer {newer}: incomplete, without a DONE marker" in p.stderr,
              f"eval of a run directory whose newest checkpoint is incomplete: {p.stderr.strip()[-300:]}")

    if failures:
        sys.exit("FAILED: " + "; ".join(failures))
    print("all passed")


if __name__ == "__main__":
    main()
