#!/usr/bin/env python3
"""`trident launch -n N -- train ...` end to end: the same run on 1, 2 and 4 ranks (through
mpirun, as the CLI starts it) logs the same per-step losses (within 1e-5 relative), also with
ZeRO-3 on 2 ranks, whose sharded checkpoint (one file per rank) `trident export` consolidates
into the weights the one-process run saved, and with tensor (x pipeline) parallelism; every
one of those checkpoints loads in `trident sample` and `trident eval` in one process; a
global batch the ranks cannot split is refused on every rank, naming the rank, without a hang.

    launch_test.py TRIDENT
"""
import array
import json
import os
import struct
import subprocess
import sys
import tempfile


def losses(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return ([r["loss"] for r in rows if "loss" in r], [r["val_loss"] for r in rows if "val_loss" in r],
            [r.get("comm_bytes") for r in rows if "loss" in r])


def read_safetensors(path):
    """{name: list of floats} of an F32 safetensors file (stdlib only)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        out[name] = array.array("f", data[8 + n + b:8 + n + end]).tolist()
    return out


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures = []
    with tempfile.TemporaryDirectory(prefix="trident_launch_test_") as d:
        text = os.path.join(d, "text.txt")
        with open(text, "w") as f:  # a small corpus with structure
            for i in range(3000):
                f.write(f"line {i % 37} says {'abc'[i % 3] * (1 + i % 5)} and {i % 11}.\n")
        subprocess.run([trident, "prepare", "--out", os.path.join(d, "data"), "--tokenizer", "byte", text],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        args = ["--model.n_layer=2", "--model.n_head=2", "--model.n_embd=32", "--model.block_size=32",
                "--model.vocab_size=256", "--data.tokenizer=byte", f"--data.train_file={d}/data/train.bin",
                f"--data.val_file={d}/data/val.bin", "--data.batch_size=8", "--data.seq_len=32",
                "--data.sampler=sequential", "--train.steps=12", "--train.eval_interval=6", "--train.eval_batches=2",
                "--train.threads=1"]
        results = {}
        for n, extra in ((1, []), (2, []), (4, []), ("2 ZeRO-3", ["--parallel.zero_stage=3"]),
                         ("2 tp x pp", ["--parallel.tp=2", "--parallel.pp=1"]),
                         ("4 tp x pp", ["--parallel.tp=2", "--parallel.pp=2", "--data.grad_accum_steps=1"])):
            ranks = n if isinstance(n, int) else int(n.split()[0])
            run = os.path.join(d, f"run{n}".replace(" ", "_"))
            p = subprocess.run([trident, "launch", "-n", str(ranks), "--", "train"] + args + extra
                               + [f"--train.out_dir={run}"], env=env, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                failures.append(f"{n} ranks: exit {p.returncode}\n{p.stderr[-2000:]}")
                continue
            results[n] = losses(run)

        # The ZeRO-3 run's checkpoint: one shard file per rank, consolidated by `trident export`
        # into the weights the one-process run wrote whole.
        z3 = os.path.join(d, "run2_ZeRO-3", "step_000012")
        if "2 ZeRO-3" in results and 1 in results:
            files = sorted(os.listdir(z3))
            if [f for f in files if f.startswith("shard.rank")] != ["shard.rank00000.safetensors",
                                                                   "shard.rank00001.safetensors"]:
                failures.append(f"ZeRO-3 checkpoint files: {files}")
            out = os.path.join(d, "z3.safetensors")
            p = subprocess.run([trident, "export", "--checkpoint", z3, "--out", out], env=env, capture_output=True,
                               text=True, timeout=120)
            if p.returncode != 0:
                failures.append(f"export: exit {p.returncode}\n{p.stderr[-2000:]}")
            else:
                got = read_safetensors(out)
                want = read_safetensors(os.path.join(d, "run1", "step_000012", "model.safetensors"))
                if sorted(got) != sorted(want):
                    failures.append(f"export: tensors {sorted(got)} vs one process's {sorted(want)}")
                for name in sorted(set(got) & set(want)):
                    worst = max(abs(a - b) / (1e-3 + abs(b)) for a, b in zip(got[name], want[name]))
                    if len(got[name]) != len(want[name]) or worst > 1e-3:
                        failures.append(f"export: {name} differs from one process's (worst relative {worst:.2e})")
                print(f"launch_test: export of the ZeRO-3 checkpoint: {len(got)} tensors match one process's")
        # Every parallel layout's checkpoint loads in one process: sample and eval.
        for run in ("run2_ZeRO-3", "run2_tp_x_pp", "run4_tp_x_pp"):
            ckpt = os.path.join(d, run, "step_000012")
            if not os.path.isdir(ckpt):
                continue
            for cmd in (["sample", "--tokens", "8", "--prompt", "line"], ["eval", "--batches", "1"]):
                p = subprocess.run([trident] + cmd + ["--checkpoint", ckpt], env=env, capture_output=True, text=True,
                                   errors="replace", timeout=120)
                if p.returncode != 0:
                    failures.append(f"{cmd[0]} of {run}'s checkpoint: exit {p.returncode}\n{p.stderr[-2000:]}")
        if 1 in results:
            ref_train, ref_val, _ = results[1]
            for n, (tr, va, comm_bytes) in results.items():
                # Every step reports what this rank communicated (4 bytes per parameter and more).
                if any(b is None or b <= 0 for b in comm_bytes):
                    failures.append(f"{n} ranks: comm_bytes missing or zero in metrics: {comm_bytes}")
                for what, a, b in (("train", tr, ref_train), ("val", va, ref_val)):
                    if len(a) != len(b) or any(abs(x - y) > 1e-5 * abs(y) for x, y in zip(a, b)):
                        failures.append(f"{n} ranks: {what} losses {a} differ from one process's {b}")
            print(f"launch_test: {len(ref_train)} steps, final loss {ref_train[-1]:.6f} on 1 rank; "
                  + ", ".join(f"{n} ranks {results[n][0][-1]:.6f}" for n in results))
        bad = subprocess.run([trident, "launch", "-n", "2", "--", "train"] + args +
                             ["--data.batch_size=7", f"--train.out_dir={d}/bad"],
                             env=env, capture_output=True, text=True, timeout=120)
        # 78: a configuration error (Note [Exit statuses]), so that launch --max-restarts does not retry it.
        if bad.returncode != 78 or "error (rank 0)" not in bad.stderr or "data.batch_size (7)" not in bad.stderr:
            failures.append(f"an indivisible batch: exit {bad.returncode}, stderr:\n{bad.stderr[-2000:]}")
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
