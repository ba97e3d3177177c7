#!/usr/bin/env python3
"""`eval` and `sample` of weights that are not finite (issue #47 item 1): a tiny GPT-2 trains a
few steps and is exported (`trident export --out DIR`); one value of one weight in the export's
model.safetensors is set to NaN (a Hugging Face directory carries no checksums: this is how such
weights reach a user). Then
  - `eval` exits non-zero, says the loss is not finite, and still prints valid JSON, with null
    for the loss and perplexity (JSON has no NaN; the old code printed `nan`);
  - `sample` exits non-zero naming the weight that holds the NaN, and prints no text;
  - the unchanged export evaluates (exit 0, a finite loss) and samples.

    non_finite_weights_test.py TRIDENT
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import prepare_corpus, report, tiny_args  # noqa: E402


def poison(path):
    """Sets the first value of the first F32 tensor (by name) of a safetensors file to NaN."""
    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        name = sorted(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32")[0]
        f.seek(8 + n + header[name]["data_offsets"][0])
        f.write(struct.pack("<f", float("nan")))
    return name


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures = []
    with tempfile.TemporaryDirectory(prefix="trident_non_finite_") as d:
        prepare_corpus(trident, d, env)
        run = os.path.join(d, "run")
        p = subprocess.run([trident, "train"] + tiny_args(d) + ["--train.steps=4", f"--train.out_dir={run}"],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return report("non_finite_weights", [f"train: exit {p.returncode}\n{p.stderr[-2000:]}"])
        good, bad = os.path.join(d, "good"), os.path.join(d, "bad")
        for out in (good, bad):
            p = subprocess.run([trident, "export", "--checkpoint", run, "--out", out], env=env, capture_output=True,
                               text=True)
            if p.returncode != 0:
                return report("non_finite_weights", [f"export: exit {p.returncode}\n{p.stderr[-2000:]}"])
        name = poison(os.path.join(bad, "model.safetensors"))
        val = os.path.join(d, "data", "val.bin")
        for model, finite in ((good, True), (bad, False)):
            e = subprocess.run([trident, "eval", "--checkpoint", model, "--val-file", val],
                               env=env, capture_output=True, text=True)
            try:
                doc = json.loads(e.stdout)
            except ValueError:
                doc = None
            if finite and (e.returncode != 0 or not doc or not isinstance(doc.get("val_loss"), float)):
                failures.append(f"eval of finite weights: exit {e.returncode}, stdout {e.stdout!r}\n{e.stderr[-1000:]}")
            if not finite and (e.returncode == 0 or doc is None or doc.get("val_loss") is not None or
                               doc.get("perplexity") is not None or "finite" not in e.stderr):
                failures.append(f"eval of NaN weights: exit {e.returncode}, stdout {e.stdout!r} (want valid JSON "
                                f"with null), stderr {e.stderr[-1000:]}")
            s = subprocess.run([trident, "sample", "--checkpoint", model, "--tokenizer", "byte", "--prompt", "line",
                                "--tokens", "8"], env=env, capture_output=True, text=True,
                               errors="replace")
            if finite and (s.returncode != 0 or not s.stdout.strip()):
                failures.append(f"sample of finite weights: exit {s.returncode}\n{s.stderr[-1000:]}")
            if not finite and (s.returncode == 0 or name not in s.stderr or "not finite" not in s.stderr):
                failures.append(f"sample of NaN weights ({name}): exit {s.returncode}, stdout {s.stdout!r}, "
                                f"stderr {s.stderr[-1000:]}")
            if not finite and not failures:
                print(f"non_finite_weights: eval says {e.stdout.strip()} with exit {e.returncode}; sample: "
                      f"{s.stderr.strip().splitlines()[-1]}")
    return report("non_finite_weights", failures)


if __name__ == "__main__":
    sys.exit(main())
