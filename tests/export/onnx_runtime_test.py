"""`trident export --format onnx` checked in ONNX Runtime itself (issue #50): onnxruntime-node's
CPU build (pinned in tests/export/onnxruntime, installed by scripts/install-npm-tool.sh) runs
the exported files, and Debian's python3-onnx checker accepts them.

  - random-weight models (export_test's OnnxExportTest.OnnxRuntimeCases writes them with
    trident's logits and greedy tokens): gpt2, llama untied, llama tied with Llama 3's RoPE
    scaling, qwen2's q/k/v biases, gpt2 with its weights in ONNX external data. ONNX Runtime's
    logits are within 1e-4 of trident's, in one call, in two calls with the first call's
    present.N.* fed back as past_key_values.N.*, and (llama) after pad tokens attention_mask
    hides; its greedy tokens, one call per token with the cache, are trident's;
  - a tiny byte-level GPT-2 and a tiny LLaMA (grouped kv heads) trained by `trident train`,
    exported as f32, f16 and int8: f32's 32 greedy tokens (ONNX Runtime with past key/values)
    are `trident sample --temperature 0`'s; on the validation windows `trident eval` reads,
    f32's perplexity is trident's (within 0.1%) and int8's within 1% of trident's int8
    (`trident quantize --scheme int8`);
  - onnx.checker.check_model (full_check, run by /usr/bin/python3) accepts every file;
  - bad input: --type q8_0 names the allowed ONNX types; a truncated file is refused by ONNX
    Runtime too.
Skips (77), saying so, without node and onnxruntime-node, or without python3-onnx.

    onnx_runtime_test.py TRIDENT EXPORT_TEST TOOLS_DIR
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Cli, node_tool_missing, prepare_corpus, report, run_node_jobs, tiny_args  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "line 3 says"
TOKENS = 32
LOGITS_TOL = 1e-4
PPL_TOL = 0.01
EVAL = {"batches": 4, "batch_size": 4, "seq_len": 64}
CHECKER = "/usr/bin/python3"


def tokens_of(path):
    """A trident token file's ids (data/token_file.h: uint16, or "TRITOK32" + count + uint32)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] == b"TRITOK32" and len(data) == 16 + 4 * struct.unpack("<Q", data[8:16])[0]:
        return list(struct.unpack(f"<{(len(data) - 16) // 4}I", data[16:]))
    return list(struct.unpack(f"<{len(data) // 2}H", data))


def eval_windows(ids):
    """The windows `trident eval` reads (data::SequentialSampler): batch i row b is window
    r = i*B + b of T + 1 ids starting at r*T."""
    T, n = EVAL["seq_len"], EVAL["batches"] * EVAL["batch_size"]
    windows = (len(ids) - 1) // T
    return [ids[(r % windows) * T:(r % windows) * T + T + 1] for r in range(n)]


def main():
    trident, export_test, tools = sys.argv[1], sys.argv[2], sys.argv[3]
    missing = node_tool_missing("onnx_runtime", tools, "onnxruntime-node", "tests/export/onnxruntime")
    if missing:
        print(missing)
        return 77
    if subprocess.run([CHECKER, "-c", "import onnx"], capture_output=True).returncode != 0:
        print(f"onnx_runtime: skipped: needs Debian's python3-onnx ({CHECKER} -c 'import onnx' failed)")
        return 77
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = Cli(trident, env)
    failures, run, check = cli.failures, cli.run, cli.check

    def onnx_runtime(jobs):
        return run_node_jobs(os.path.join(HERE, "onnxruntime", "onnx_jobs.mjs"), tools, jobs, d, failures)

    def checker(files):
        code = ("import onnx, sys\nfor f in sys.argv[1:]:\n"
                "    onnx.checker.check_model(f, full_check=True)\n    print('checked', f)")
        r = subprocess.run([CHECKER, "-c", code] + files, capture_output=True, text=True)
        check(r.returncode == 0, f"onnx.checker.check_model (python3-onnx, full_check) accepts {len(files)} files"
                                 + ("" if r.returncode == 0 else f": {r.stderr[-1500:]}"))

    with tempfile.TemporaryDirectory(prefix="trident_onnx_runtime_") as d:
        # Random-weight models against trident's own forward.
        cases_dir = os.path.join(d, "cases")
        p = subprocess.run([export_test, "--gtest_filter=OnnxExportTest.OnnxRuntimeCases"],
                           env=dict(env, TRIDENT_ONNX_CASES=cases_dir), capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"export_test OnnxRuntimeCases exited {p.returncode}: {p.stdout[-2000:]}")
            return report("onnx_runtime", failures)
        with open(os.path.join(cases_dir, "cases.json")) as f:
            cases = json.load(f)
        shape = ("model", "layers", "kv_heads", "head_dim", "position_ids")
        jobs = []
        for c in cases:
            base = {k: c[k] for k in shape}
            jobs.append(dict(base, op="logits", ids=c["ids"], split=5, pad=3 if c["position_ids"] else 0))
            jobs.append(dict(base, op="greedy", ids=c["prompt"], tokens=len(c["greedy"])))
        results = onnx_runtime(jobs)
        for i, c in enumerate(cases):
            got, greedy = results[2 * i], results[2 * i + 1]
            if "error" in got or "error" in greedy:
                check(False, f"{c['name']}: ONNX Runtime: {got.get('error') or greedy.get('error')}")
                continue
            ways = {"full": "one call", "cached": "two calls, past fed back",
                    "padded": "after 3 pad tokens attention_mask hides, position_ids from 0"}
            for how in [w for w in ways if w in got]:
                diff = max(abs(a - b) for a, b in zip(got[how], c["logits"]))
                check(len(got[how]) == len(c["logits"]) and diff <= LOGITS_TOL,
                      f"{c['name']}: ONNX Runtime's logits ({how}: {ways[how]}) within {LOGITS_TOL} of trident's: "
                      f"max |diff| {diff:.2e} over {len(c['logits'])}")
            check(greedy["ids"] == c["greedy"], f"{c['name']}: ONNX Runtime's {len(c['greedy'])} greedy tokens with past "
                                                f"key/values are trident's ({greedy['ids']} vs {c['greedy']})")
        checker([c["model"] for c in cases])

        # Trained models through the CLI.
        prepare_corpus(trident, d, env)
        models = {"gpt2": [], "llama": ["--model.arch=llama", "--model.n_kv_heads=1", "--model.intermediate_size=128"]}
        for name, extra in models.items():
            run(["train"] + tiny_args(d, n_embd=64) + extra + ["--train.steps=300", "--optim.lr=0.01",
                                                              f"--train.out_dir={d}/{name}"])
        if failures:
            return report("onnx_runtime", failures)
        windows = eval_windows(tokens_of(os.path.join(d, "data", "val.bin")))
        eval_flags = ["--batches", str(EVAL["batches"]), "--batch-size", str(EVAL["batch_size"]),
                      "--seq-len", str(EVAL["seq_len"])]
        jobs, expect, files = [], [], []
        for name in models:
            ckpt = os.path.join(d, name)
            def sample(model):
                p = run(["sample", "--checkpoint", model, "--prompt", PROMPT, "--tokens", str(TOKENS), "--temperature", "0"])
                return list(p.stdout.encode()[len(PROMPT):len(PROMPT) + TOKENS])
            ours = sample(ckpt)
            run(["quantize", "--checkpoint", ckpt, "--scheme", "int8", "--out", f"{d}/{name}_int8"])
            ours_int8 = sample(f"{d}/{name}_int8")
            p = run(["eval", "--checkpoint", f"{d}/{name}_int8"] + eval_flags)
            int8_ppl = json.loads(p.stdout)["perplexity"] if p.returncode == 0 else None
            p = run(["eval", "--checkpoint", ckpt] + eval_flags)
            f32_ppl = json.loads(p.stdout)["perplexity"] if p.returncode == 0 else None
            for t in ("f32", "f16", "int8"):
                out = f"{d}/{name}-{t}.onnx"
                p = run(["export", "--checkpoint", ckpt, "--out", out, "--type", t])
                if p.returncode != 0:
                    continue
                summary = json.loads(p.stdout)
                check(summary["format"] == "onnx" and summary["type"] == t and summary["architecture"] == name and
                      summary["opset"] == 17, f"{name} {t}: export's summary {summary}")
                files.append(out)
                base = {"model": out, "layers": 2, "kv_heads": 2 if name == "gpt2" else 1, "head_dim": 32,
                        "position_ids": True}
                jobs.append(dict(base, op="greedy", ids=list(PROMPT.encode()), tokens=TOKENS))
                expect.append((name, t, "greedy", ours_int8 if t == "int8" else ours))
                jobs.append(dict(base, op="nll", windows=windows))
                expect.append((name, t, "nll", int8_ppl if t == "int8" else f32_ppl))
        for (name, t, op, want), got in zip(expect, onnx_runtime(jobs)):
            if "error" in got:
                check(False, f"{name} {t} {op}: ONNX Runtime: {got['error']}")
                continue
            if op == "greedy":
                same = next((i for i, (a, b) in enumerate(zip(got["ids"], want)) if a != b), len(want))
                if t == "f32":
                    check(got["ids"] == want, f"{name} f32: ONNX Runtime's {TOKENS} greedy tokens with past key/values "
                                              f"are trident sample's ({bytes(got['ids'])!r}; first {same} agree)")
                else:
                    print(f"info {name} {t}: ONNX Runtime's greedy tokens agree with trident's "
                          f"{'int8' if t == 'int8' else 'fp32'} for {same} of {TOKENS}")
            else:

                ppl = math.exp(got["nll"] / got["tokens"])
                ours = "int8 (trident quantize --scheme int8)" if t == "int8" else "fp32"
                if want is None:
                    check(False, f"{name} {t}: trident eval gave no perplexity")
                elif t == "int8":
                    check(abs(ppl / want - 1) <= PPL_TOL, f"{name} int8: ONNX Runtime's perplexity {ppl:.4f} within "
                                                          f"{PPL_TOL:.0%} of trident's {ours} {want:.4f} "
                                                          f"({got['tokens']} tokens)")
                elif t == "f32":
                    check(abs(ppl / want - 1) <= 1e-3, f"{name} f32: ONNX Runtime's perplexity {ppl:.4f} is trident "
                                                       f"eval's {want:.4f} (within 0.1%)")
                else:
                    print(f"info {name} {t}: ONNX Runtime's perplexity {ppl:.4f}, trident's {ours} {want:.4f}")
        checker(files)

        # Bad input.
        cli.refused(["export", "--checkpoint", f"{d}/gpt2", "--out", f"{d}/x.onnx", "--type", "q8_0"],
                    "allowed: f32, f16, int8")
        whole = f"{d}/gpt2-f32.onnx"
        if os.path.isfile(whole):
            with open(whole, "rb") as f:
                data = f.read()
            with open(f"{d}/cut.onnx", "wb") as f:
                f.write(data[:len(data) - 100])
            got = onnx_runtime([{"op": "greedy", "model": f"{d}/cut.onnx", "layers": 2, "kv_heads": 2, "head_dim": 32,
                                 "position_ids": True, "ids": [1], "tokens": 1}])[0]
            check("error" in got, f"ONNX Runtime refuses the truncated file too: {str(got)[:160]}")
    return report("onnx_runtime", failures)


if __name__ == "__main__":
    sys.exit(main())
