#!/usr/bin/env python3
"""Checkpoints across two builds of trident: each one's checkpoints resume in the other.

Usage: compat_across_versions.py OLD_TRIDENT NEW_TRIDENT [MPIRUN] [--strip-keys=section.key,...]

Not a ctest (CI has one build): run it by hand when a change touches the checkpoint format,
with OLD_TRIDENT built from the commit before it. For each layout (one process, data parallel,
ZeRO 1-3, tensor and pipeline parallel, their compositions, bf16, compressed gradients), each
binary trains a tiny GPT-2 for 4 steps saving at step 2; the other binary resumes from that
step-2 checkpoint; its steps 3 and 4 must equal the writer's own steps 3 and 4 bit for bit
(the two builds compute the same numbers: tests/parallel/golden_losses_test pins them).
A checkpoint's config.toml holds every [section] key of its writer, and a build refuses keys it
does not know (unknown keys are errors): with --strip-keys train.freeze,... the script removes
those lines from the new checkpoint's config.toml (and updates the sizes and CRC-32Cs the
manifest and DONE vouch for) before the old build reads it, so what is checked is the tensors' format.
Prints one line per layout and direction; exits 1 on any difference or failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

LAYOUTS = [
    ("single", 1, []),
    ("dp2", 2, []),
    ("dp2_zero1", 2, ["--parallel.zero_stage=1"]),
    ("dp2_zero2_bf16", 2, ["--parallel.zero_stage=2", "--precision.dtype=bf16"]),
    ("dp2_zero3", 2, ["--parallel.zero_stage=3"]),
    ("tp2", 2, ["--parallel.tp=2"]),
    ("pp2", 2, ["--parallel.pp=2"]),
    ("dp2_powersgd", 2, ["--parallel.grad_compression=powersgd", "--parallel.powersgd_start_step=1"]),
    ("dp2_tp2_zero1", 4, ["--parallel.tp=2", "--parallel.zero_stage=1"]),
    ("tp2_pp2", 4, ["--parallel.tp=2", "--parallel.pp=2"]),
]

TINY = ["--model.n_layer=2", "--model.n_head=2", "--model.n_embd=32", "--model.block_size=16",
        "--model.vocab_size=64", "--data.seq_len=16", "--data.batch_size=8", "--data.sampler=sequential",
        "--train.steps=4", "--train.checkpoint_interval=2", "--train.checkpoint_keep=4",
        "--train.eval_interval=1000", "--train.eval_batches=1", "--lr_schedule.warmup_steps=1",
        "--model.dropout=0.1"]


def crc32c(data):
    table = crc32c.table
    if table is None:
        table = crc32c.table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


crc32c.table = None


def strip_keys(ckpt, keys):
    """Removes `section.key` lines from ckpt/config.toml and re-lists it in the manifest."""
    path = os.path.join(ckpt, "config.toml")
    section, out = "", []
    with open(path) as f:
        for line in f:
            if line.startswith("["):
                section = line.strip().strip("[]")
            name = line.split("=")[0].strip()
            if f"{section}.{name}" in keys:
                continue
            out.append(line)
    data = "".join(out).encode()
    with open(path, "wb") as f:
        f.write(data)
    mpath = os.path.join(ckpt, "manifest.json")
    with open(mpath) as f:
        manifest = json.load(f)
    for entry in manifest["files"]:
        if entry["name"] == "config.toml":
            entry["size"] = len(data)
            entry["crc32c"] = f"{crc32c(data):08x}"
    text = json.dumps(manifest, indent=2).encode()
    with open(mpath, "wb") as f:
        f.write(text)
    # DONE vouches for the manifest's size and checksum.
    dpath = os.path.join(ckpt, "DONE")
    with open(dpath) as f:
        done = json.load(f)
    done["manifest_size"] = len(text)
    done["manifest_crc32c"] = f"{crc32c(text):08x}"
    with open(dpath, "w") as f:
        f.write(json.dumps(done, separators=(",", ":")))


def write_tokens(path, n, seed):
    import random
    rng = random.Random(seed)
    with open(path, "wb") as f:
        for _ in range(n):
            f.write(rng.randrange(64).to_bytes(2, "little"))


def losses(run_dir):
    out = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j and "step" in j and j.get("kind", "train") == "train":
                out[j["step"]] = j["loss"]
    return out


def train(binary, mpirun, np, run_dir, data, extra):
    cmd = [binary, "train", f"--data.train_file={data}/train.bin", f"--data.val_file={data}/val.bin",
           f"--train.out_dir={run_dir}"] + TINY + extra
    if np > 1:
        cmd = [mpirun, "-np", str(np), "--oversubscribe"] + cmd
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--strip-keys=")]
    strip = [k for a in sys.argv[1:] if a.startswith("--strip-keys=") for k in a.split("=", 1)[1].split(",") if k]
    old, new = args[0], args[1]
    mpirun = args[2] if len(args) > 2 else "mpirun"
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        write_tokens(os.path.join(data, "train.bin"), 20000, 1)
        write_tokens(os.path.join(data, "val.bin"), 3000, 2)
        for name, np, extra in LAYOUTS:
            for writer, reader, direction in ((old, new, "old -> new"), (new, old, "new -> old")):
                base = os.path.join(tmp, f"{name}_{direction[:3]}")
                straight, resumed = base + "_straight", base + "_resumed"
                try:
                    train(writer, mpirun, np, straight, data, extra)
                    os.makedirs(resumed)
                    shutil.copytree(os.path.join(straight, "step_000002"), os.path.join(resumed, "step_000002"))
                    if writer == new and strip:
                        strip_keys(os.path.join(resumed, "step_000002"), strip)
                    train(reader, mpirun, np, resumed, data, extra)
                    want, got = losses(straight), losses(resumed)
                    same = all(got.get(s) == want.get(s) for s in (3, 4)) and 3 in got and 4 in got
                    print(f"{name:16s} {direction}: steps 3-4 {'identical' if same else 'DIFFER'}"
                          f" ({got.get(3)}, {got.get(4)} vs {want.get(3)}, {want.get(4)})", flush=True)
                    failed += 0 if same else 1
                except Exception as e:  # a refused checkpoint, a crash
                    print(f"{name:16s} {direction}: FAILED\n{e}", flush=True)
                    failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
