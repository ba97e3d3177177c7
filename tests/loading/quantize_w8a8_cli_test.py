#!/usr/bin/env python3
"""`trident quantize --scheme w8a8` end to end (issue #49 item 2, W8A8): int8 weights per output
channel with int8 activations per token, in a quantized directory that sample and eval read.

  - a tiny byte-level GPT-2 (Conv1D layers, quantized as their transpose) and a tiny LLaMA train a
    few steps; `quantize --scheme w8a8` writes codes (u16 pairs of int8) and f32 scales per layer,
    one scale per output channel; quantizing twice writes the same bytes;
  - eval's loss is within 2% of the checkpoint's (the issue's W8A8 criterion, here on a tiny
    model; bench/quantize_quality.py measures it on held-out text); greedy sample is deterministic;
  - bad files, each an error naming the file, the parameter and what is wrong: a negative scale, a
    NaN scale, a code of -128, scales of the wrong dtype.

    quantize_w8a8_cli_test.py TRIDENT
"""
import json
import math
import os
import shutil
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from quantize_cli_test import tensors_of, write_safetensors  # noqa: E402
from runlib import Cli, prepare_corpus, report, tiny_args  # noqa: E402


def main():
    trident = sys.argv[1]
    cli = Cli(trident, dict(os.environ, OMP_NUM_THREADS="1"))
    failures, run, check = cli.failures, cli.run, cli.check
    with tempfile.TemporaryDirectory(prefix="trident_quantize_w8a8_cli_") as d:
        prepare_corpus(trident, d, cli.env)
        gpt2, llama = os.path.join(d, "gpt2"), os.path.join(d, "llama")
        steps = ["--train.steps=30", "--optim.lr=0.01"]
        run(["train"] + tiny_args(d, n_embd=64) + steps + [f"--train.out_dir={gpt2}"])
        run(["train"] + tiny_args(d, n_embd=64) + steps + ["--model.arch=llama", "--model.n_kv_heads=1",
                                                           "--model.intermediate_size=128", f"--train.out_dir={llama}"])
        if failures:
            return report("quantize_w8a8_cli", failures)
        greedy = ["--prompt", "line 3 says", "--tokens", "24", "--temperature", "0"]
        for name, ckpt, layers, params in (("gpt2", gpt2, 8, 2 * 12 * 64 * 64), ("llama", llama, 14, None)):
            base = cli.loss_of(["--checkpoint", ckpt, "--batches", "4"])
            out = os.path.join(d, f"{name}_w8a8")
            p = run(["quantize", "--checkpoint", ckpt, "--scheme", "w8a8", "--out", out])
            if p.returncode != 0:
                continue
            summary = json.loads(p.stdout)
            check(summary["quantized_layers"] == layers and summary["scheme"] == "w8a8"
                  and summary["block_format"] == "W8A8" and (params is None or summary["quantized_parameters"] == params),
                  f"{name}: quantize's summary {summary}")
            info = json.load(open(os.path.join(out, "quantization.json")))
            check(info["scheme"] == "w8a8" and all(v["transposed"] == (name == "gpt2") for v in info["parameters"].values()),
                  f"{name}: quantization.json {list(info['parameters'].items())[:1]}")
            tensors, _ = tensors_of(os.path.join(out, "model.safetensors"))
            shapes = {n: (dt, sh) for n, dt, sh, _ in tensors}
            wrong = []
            for param, entry in info["parameters"].items():
                rows, cols = entry["shape"][::-1] if entry["transposed"] else entry["shape"]
                want = {param + ".codes": ("U16", [rows, (cols + 1) // 2]), param + ".scales": ("F32", [rows])}
                wrong += [(k, shapes.get(k), v) for k, v in want.items() if shapes.get(k) != v]
            check(not wrong, f"{name}: codes (out, in / 2) u16 and scales (out) f32 per layer; wrong: {wrong}")
            again = os.path.join(d, f"{name}_w8a8_again")
            run(["quantize", "--checkpoint", ckpt, "--scheme", "w8a8", "--out", again])
            same = open(os.path.join(out, "model.safetensors"), "rb").read() == \
                open(os.path.join(again, "model.safetensors"), "rb").read()
            check(same, f"{name}: quantizing twice writes the same model.safetensors")
            q = cli.loss_of(["--checkpoint", out, "--batches", "4"])
            if base is not None and q is not None:
                check(abs(q - base) <= 0.02 * base, f"{name}: eval loss {q:.5f} within 2% of fp32's {base:.5f}")
            s1, s2 = run(["sample", "--checkpoint", out] + greedy), run(["sample", "--checkpoint", out] + greedy)
            check(s1.returncode == 0 and s1.stdout == s2.stdout and len(s1.stdout) > len("line 3 says"),
                  f"{name}: sample {s1.stdout!r}")

        # Bad files: each a copy of GPT-2's directory with one tensor's bytes or dtype changed.
        good = os.path.join(d, "gpt2_w8a8")
        layer = "h.0.attn.c_attn.weight"

        def broken(tag, fn):
            bad = os.path.join(d, f"bad_{tag}")
            shutil.copytree(good, bad)
            path = os.path.join(bad, "model.safetensors")
            tensors, meta = tensors_of(path)
            write_safetensors(path, [fn(t) if t[0].startswith(layer) else t for t in tensors], meta)
            return bad, run(["sample", "--checkpoint", bad] + greedy, want_ok=False)

        def scale_1(value):
            def edit(t):
                n, dt, sh, b = t
                return (n, dt, sh, b[:4] + struct.pack("<f", value) + b[8:]) if n.endswith(".scales") else t
            return edit

        def code_0_5_minus_128(t):
            n, dt, sh, b = t
            return (n, dt, sh, b[:5] + b"\x80" + b[6:]) if n.endswith(".codes") else t

        def scales_f16(t):
            n, dt, sh, b = t
            return (n, "F16", sh, b[:len(b) // 2]) if n.endswith(".scales") else t

        cases = [("negative_scale", scale_1(-0.5), ["the scale of row 1 is -0.5", "finite and >= 0"]),
                 ("nan_scale", scale_1(math.nan), ["the scale of row 1 is nan"]),
                 ("code_minus_128", code_0_5_minus_128, ["the code at row 0, column 5 is -128", "[-127, 127]"]),
                 ("scales_dtype", scales_f16, [f"'{layer}.scales' is F16, expected F32"])]
        for tag, fn, words in cases:
            bad, p = broken(tag, fn)
            named = os.path.join(bad, "model.safetensors") in p.stderr and layer in p.stderr
            check(p.returncode != 0 and named and all(w in p.stderr for w in words),
                  f"bad file ({tag}): {p.stderr.strip()[-300:]}")
    return report("quantize_w8a8_cli", failures)


if __name__ == "__main__":
    sys.exit(main())
