#!/usr/bin/env python3
"""`trident train`'s printed config is a config (issue #19), and training without a
validation split works:

  - the config `train` prints at start, and `--print-config`, are the same text; saved to a
    file and passed to `train --config`, it resolves to the same config (printed the same
    again) and trains to the same losses bit for bit. The run has overrides in every section,
    a float that needs all 17 digits, and an out_dir with a quote, a backslash and a space.
  - `prepare --val-fraction 0` writes no val.bin (and removes an older one); `train` then runs
    with evaluation off and says so. --val-fraction out of [0, 0.9] or NaN is an error naming
    the flag and the range, and an input file that is --out's train.bin or val.bin is refused.
  - [kernels]: the printed config names the GEMM engines, never "auto" (Note [GEMM engines]);
    a bad engine is an error naming the key, the value and what is allowed. train.mfu prints
    the measured ceiling and writes each step's `mfu`; `gemm-rates --json` measures the
    config's shapes.

    cli_config_test.py TRIDENT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, cwd, env):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def step_losses(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return [r["loss"] for r in rows if "loss" in r], [r["val_loss"] for r in rows if "val_loss" in r]


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures = []
    with tempfile.TemporaryDirectory(prefix="trident_cli_config_test_") as d:
        text = os.path.join(d, "text.txt")
        with open(text, "w") as f:
            for i in range(2000):
                f.write(f"line {i % 37} says {'abc'[i % 3] * (1 + i % 5)} and {i % 11}.\n")
        data = os.path.join(d, "data")
        p = run([trident, "prepare", "--out", data, "--tokenizer", "byte", text], d, env)
        assert p.returncode == 0, p.stderr
        out_dir = 'run "one" \\ two'
        overrides = ["--model.n_layer=2", "--model.n_head=2", "--model.n_embd=32", "--model.block_size=32",
                     "--model.vocab_size=256", "--model.dropout=0.1", "--data.tokenizer=byte",
                     f"--data.train_file={data}/train.bin", f"--data.val_file={data}/val.bin", "--data.batch_size=4",
                     "--data.seq_len=32", "--data.grad_accum_steps=2", "--data.seed=7",
                     "--optim.lr=0.0012345678901234567", "--optim.weight_decay=0.05",
                     "--lr_schedule.warmup_steps=3", "--precision.dtype=bf16", "--parallel.bucket_mb=1.5",
                     "--train.steps=8", "--train.eval_interval=4", "--train.eval_batches=2", "--train.threads=1",
                     "--train.max_runtime=1h30m", f"--train.out_dir={out_dir}"]
        printed = run([trident, "train", "--print-config"] + overrides, d, env)
        if printed.returncode != 0 or "[model]" not in printed.stdout:
            sys.exit(f"FAIL: --print-config: exit {printed.returncode}\n{printed.stderr}")
        config = printed.stdout
        if "[kernels]" not in config or 'f32_gemm = "auto"' in config or 'bf16_gemm = "auto"' in config:
            failures.append(f"the printed config does not name the GEMM engines:\n{config}")

        # Two working directories: the same relative out_dir, so the two configs are one text.
        one, two = os.path.join(d, "one"), os.path.join(d, "two")
        os.makedirs(one)
        os.makedirs(two)
        first = run([trident, "train"] + overrides, one, env)
        if first.returncode != 0:
            failures.append(f"train with overrides: exit {first.returncode}\n{first.stderr[-2000:]}")
        elif first.stdout != config:
            failures.append(f"train printed another config than --print-config:\n{first.stdout}\n---\n{config}")
        saved = os.path.join(d, "printed.toml")
        with open(saved, "w") as f:
            f.write(config)
        again = run([trident, "train", "--config", saved, "--print-config"], two, env)
        if again.stdout != config:
            failures.append(f"--config of the printed config resolves differently:\n{again.stdout}\n---\n{config}")
        second = run([trident, "train", "--config", saved], two, env)
        if second.returncode != 0:
            failures.append(f"train --config printed.toml: exit {second.returncode}\n{second.stderr[-2000:]}")
        elif second.stdout != config:
            failures.append("train --config printed.toml printed another config")
        if not failures:
            a, b = step_losses(os.path.join(one, out_dir)), step_losses(os.path.join(two, out_dir))
            if a != b or len(a[0]) != 8 or len(a[1]) != 2:
                failures.append(f"losses differ: overrides {a} vs printed config {b}")
            else:
                print(f"cli_config_test: the printed config ({len(config.splitlines())} lines) trains to the same "
                      f"{len(a[0])} losses and {len(a[1])} evaluations bit for bit")

        # No validation split.
        p = run([trident, "prepare", "--out", data, "--tokenizer", "byte", "--val-fraction", "0", text], d, env)
        if p.returncode != 0 or os.path.exists(os.path.join(data, "val.bin")) or \
                "no validation split" not in p.stdout or "removed the older val.bin" not in p.stdout:
            failures.append(f"prepare --val-fraction 0: exit {p.returncode}, val.bin left: "
                            f"{os.path.exists(os.path.join(data, 'val.bin'))}\n{p.stdout}{p.stderr}")
        no_val = [o for o in overrides if not o.startswith("--train.out_dir")] + ["--train.out_dir=no_val"]
        p = run([trident, "train"] + no_val, d, env)
        if p.returncode != 0 or "evaluation is off: data.val_file" not in p.stderr or "does not exist" not in p.stderr:
            failures.append(f"train without val.bin: exit {p.returncode}\n{p.stderr[-2000:]}")
        else:
            train, val = step_losses(os.path.join(d, "no_val"))
            if len(train) != 8 or val:
                failures.append(f"train without val.bin: {len(train)} steps, evaluations {val}")
            else:
                print("cli_config_test: without a validation file, 8 steps and no evaluation, and it says so")
        # [kernels] and MFU.
        tiny = [o for o in overrides if not o.startswith(("--train.out_dir", "--train.steps", "--train.eval"))]
        p = run([trident, "train", "--print-config", "--kernels.f32_gemm=fast"] + tiny, d, env)
        if p.returncode == 0 or "f32_gemm" not in p.stderr or "fast" not in p.stderr or \
                "auto, onednn, openblas" not in p.stderr:
            failures.append(f"--kernels.f32_gemm=fast: exit {p.returncode}\n{p.stderr}")
        p = run([trident, "train", "--print-config", "--kernels.f32_gemm=openblas", "--kernels.bf16_gemm=widen"] + tiny,
                d, env)
        if p.returncode != 0 or 'f32_gemm = "openblas"' not in p.stdout or 'bf16_gemm = "widen"' not in p.stdout:
            failures.append(f"named engines: exit {p.returncode}\n{p.stdout}{p.stderr}")
        p = run([trident, "train", "--train.mfu=true", "--train.steps=2", "--train.out_dir=mfu",
                 "--train.eval_interval=0"] + tiny, d, env)
        rows = []
        if p.returncode == 0:
            with open(os.path.join(d, "mfu", "metrics.jsonl")) as f:
                rows = [json.loads(line) for line in f if '"loss"' in line]
        if p.returncode != 0 or "MFU ceiling (bf16" not in p.stderr or "| MFU " not in p.stderr or \
                len(rows) != 2 or not all(r.get("mfu", 0) > 0 for r in rows):
            failures.append(f"train.mfu: exit {p.returncode}, metrics {rows}\n{p.stderr[-2000:]}")
        else:
            print(f"cli_config_test: train.mfu reports MFU {[round(r['mfu'], 4) for r in rows]}")
        p = run([trident, "gemm-rates", "--json", "--dtype", "f32", "--seconds-per-shape", "0"] + tiny, d, env)
        try:
            rates = json.loads(p.stdout)
            ok = p.returncode == 0 and rates["gemm_ceiling_gflops"]["f32"] > 0 and \
                {"openblas-f32", "onednn-f32", "openblas-f32-threaded", "onednn-f32-threaded"} == \
                set(rates["gemm_rates"]) and len(rates["gemm_rates"]["onednn-f32"]["per_shape"]) == 15 and \
                rates["kernels"]["f32_gemm"] in ("onednn", "openblas")
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            failures.append(f"gemm-rates --json: exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")

        for value in ("0.95", "nan"):
            p = run([trident, "prepare", "--out", data, "--tokenizer", "byte", "--val-fraction", value, text], d, env)
            if p.returncode == 0 or f"--val-fraction: Value {value} is not" not in p.stderr or \
                    ("<= 0.9" if value != "nan" else "not a number") not in p.stderr:
                failures.append(f"prepare --val-fraction {value} is out of range: exit {p.returncode}\n{p.stderr}")
        # An input that is the train.bin or val.bin --out writes (or removes) would be lost.
        with open(os.path.join(data, "train.bin"), "rb") as f:
            before = f.read()
        for out, name in ((data, "train.bin"), (data + "/", "train.bin"), (os.path.join(data, "..", "data"), "val.bin")):
            shutil.copyfile(os.path.join(data, "train.bin"), os.path.join(data, "val.bin"))
            p = run([trident, "prepare", "--out", out, "--tokenizer", "byte", "--val-fraction", "0",
                     os.path.join(data, name)], d, env)
            kept = os.path.exists(os.path.join(data, name))
            if kept:
                with open(os.path.join(data, name), "rb") as f:
                    kept = f.read() == before
            if p.returncode == 0 or not kept or f"the input file '{os.path.join(data, name)}' is the {name} of " \
                    f"--out '{out}'" not in p.stderr:
                failures.append(f"prepare --out {out} over its input {name}: exit {p.returncode}, kept {kept}\n{p.stderr}")
        # A mistyped command, trident's own or launch's, is named with the closest one.
        for cmd, where in ((["trian", "--x"], ""), (["launch", "-n", "2", "--", "smaple"], "launch: ")):
            p = run([trident] + cmd, d, env)
            if p.returncode != 1 or f"{where}unknown command '{cmd[-1] if where else cmd[0]}'" not in p.stderr or \
                    ("did you mean 'train'?" if not where else "did you mean 'sample'?") not in p.stderr:
                failures.append(f"{cmd}: a mistyped command should be named: exit {p.returncode}\n{p.stderr}")
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
