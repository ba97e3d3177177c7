"""`trident export --format gguf` checked in llama.cpp itself (issue #50): node-llama-cpp's
prebuilt CPU build (pinned in tests/export/llama_cpp, installed by scripts/install-npm-tool.sh)
loads the exported files and runs them.

  - a tiny byte-level GPT-2 and a tiny LLaMA (grouped kv heads) train on a small corpus; each is
    exported as F32, F16, Q8_0 and Q4_0;
  - F32: llama.cpp's greedy continuation of a prompt is trident's, all 32 tokens;
  - F16, Q8_0, Q4_0: teacher-forced along trident's own greedy tokens (fp32 for F16, the int8
    quantized directory for Q8_0, int4 with the head quantized too for Q4_0), each of trident's
    tokens is llama.cpp's most likely or within a near tie of it (llama.cpp's usual error: its
    matmuls quantize activations to Q8_0 and its embedding rows are quantized with the table);
  - the int8 and int4 quantized directories exported as GGUF (their blocks copied, so llama.cpp
    runs trident's quantized weights exactly, with the embedding in F32 as trident keeps it):
    the same near-tie check, tighter;
  - the prompt's tokens in llama.cpp are trident's; with GPT-2's vocabulary (when its files are
    found) and tiktoken's cl100k_base and o200k_base (when scripts/fetch-tiktoken-ranks.sh put
    them in the build's data/tiktoken), llama.cpp tokenizes and detokenizes mixed texts exactly as
    `trident tokenize`;
  - SentencePiece (a Llama-style BPE model with byte fallback trained by spm_train, Debian's
    sentencepiece, when present): a tiny LLaMA trained on its tokens, exported, tokenizes a
    mixed text and continues the prompt in llama.cpp exactly as in trident;
  - bad input: a truncated export is refused naming the tensor, an unknown --type names the
    allowed ones.
Skips (77), saying so, without node and node-llama-cpp.

    gguf_llama_cpp_test.py TRIDENT TOOLS_DIR BUILD_DIR
"""
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Cli, node_tool_missing, prepare_corpus, report, run_node_jobs, tiny_args  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "line 3 says"
TOKENS = 32
# llama.cpp's probability of its argmax minus that of trident's token. Q4_0 gets more: llama.cpp
# reads the token embedding's rows from the Q4_0 table, where trident's int4 keeps the embedding
# in fp32 (Note [What stays in full precision]); measured on these tiny models: Q8_0 <= 0.005,
# Q4_0 up to 0.08. The quantized directories' own blocks (int8, int4) came within 0.0053.
NEAR_TIE = {"f16": 0.05, "q8_0": 0.05, "q4_0": 0.15, "int8": 0.02, "int4": 0.02}


def gpt2_dir(build):
    """GPT-2's vocab.json + merges.txt, looked up as tests/data/test_data.h does."""
    for d in (os.environ.get("TRIDENT_GPT2_DIR"), os.path.join(HERE, "..", "..", "..", "shared", "data", "gpt2"),
              os.path.join(build, "data", "gpt2")):
        if d and os.path.isfile(os.path.join(d, "vocab.json")) and os.path.isfile(os.path.join(d, "merges.txt")):
            return d
    return None


def main():
    trident, tools, build = sys.argv[1], sys.argv[2], sys.argv[3]
    missing = node_tool_missing("gguf_llama_cpp", tools, "node-llama-cpp", "tests/export/llama_cpp")
    if missing:
        print(missing)
        return 77
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = Cli(trident, env)
    failures, run, check = cli.failures, cli.run, cli.check

    def llama_cpp(jobs):
        return run_node_jobs(os.path.join(HERE, "llama_cpp", "llama_cpp_jobs.mjs"), tools, jobs, d, failures)

    def greedy(model, scheme_dir=None):
        """trident's greedy continuation as byte ids (the byte tokenizer: text = ids)."""
        p = run(["sample", "--checkpoint", scheme_dir or model, "--prompt", PROMPT, "--tokens", str(TOKENS),
                 "--temperature", "0"])
        return list(p.stdout.encode()[len(PROMPT):len(PROMPT) + TOKENS])

    with tempfile.TemporaryDirectory(prefix="trident_gguf_llama_cpp_") as d:
        prepare_corpus(trident, d, env)
        models = {"gpt2": [], "llama": ["--model.arch=llama", "--model.n_kv_heads=1", "--model.intermediate_size=128"]}
        for name, extra in models.items():
            run(["train"] + tiny_args(d, n_embd=64) + extra + ["--train.steps=300", "--optim.lr=0.01",
                                                              f"--train.out_dir={d}/{name}"])
        if failures:
            return report("gguf_llama_cpp", failures)
        prompt_ids = list(PROMPT.encode())
        jobs, expect = [], []
        for name in models:
            ckpt = os.path.join(d, name)
            run(["quantize", "--checkpoint", ckpt, "--scheme", "int8", "--out", f"{d}/{name}_int8"])
            run(["quantize", "--checkpoint", ckpt, "--scheme", "int4", "--skip", "", "--out", f"{d}/{name}_int4"])
            ours = {"f32": greedy(ckpt), "q8_0": greedy(ckpt, f"{d}/{name}_int8"), "q4_0": greedy(ckpt, f"{d}/{name}_int4")}
            ours["f16"] = ours["f32"]
            ours["int8"], ours["int4"] = ours["q8_0"], ours["q4_0"]
            for t in ("f32", "f16", "q8_0", "q4_0", "int8", "int4"):
                out = f"{d}/{name}-{t}.gguf"
                source = f"{d}/{name}_{t}" if t.startswith("int") else ckpt
                p = run(["export", "--checkpoint", source, "--out", out] + ([] if t.startswith("int") else ["--type", t]))
                if p.returncode != 0:
                    continue
                summary = json.loads(p.stdout)
                blocks = {"int8": "Q8_0", "int4": "Q4_0"}.get(t)
                check(summary["format"] == "gguf" and summary["architecture"] == name and
                      summary["tokenizer"] == "bytes" and
                      (summary["type"] == t if blocks is None else
                       summary["type"].startswith("copied blocks") and blocks in summary["tensors"]),
                      f"{name} {t}: export's summary {summary}")
                jobs.append({"op": "generate", "model": out, "prompt": PROMPT, "tokens": TOKENS})
                expect.append((name, t, "generate", ours[t]))
                if t != "f32":
                    jobs.append({"op": "score", "model": out, "ids": prompt_ids + ours[t], "from": len(prompt_ids)})
                    expect.append((name, t, "score", ours[t]))
        for (name, t, op, want), got in zip(expect, llama_cpp(jobs)):
            if "error" in got:
                check(False, f"{name} {t} {op}: llama.cpp: {got['error']}")
                continue
            if op == "generate":
                check(got["prompt_ids"] == prompt_ids, f"{name} {t}: llama.cpp's prompt tokens {got['prompt_ids']}")
                same = sum(1 for _ in itertools.takewhile(lambda ab: ab[0] == ab[1], zip(got["ids"], want)))
                if t == "f32":
                    check(got["ids"] == want, f"{name} f32: llama.cpp's greedy 32 tokens are trident's "
                                              f"({got['text']!r}; first {same} agree)")
                else:
                    print(f"info {name} {t}: llama.cpp's greedy tokens agree with trident's for {same} of {TOKENS}")
            else:
                gaps = [s["top_p"] - s["given_p"] for s in got["steps"]]
                worst = max(gaps)
                check(len(gaps) == TOKENS and worst <= NEAR_TIE[t],
                      f"{name} {t}: along trident's {TOKENS} tokens each is llama.cpp's argmax or within "
                      f"{NEAR_TIE[t]} of it (largest gap {worst:.4f}, {sum(g > 0 for g in gaps)} not the argmax)")

        # GPT-2's vocabulary: llama.cpp tokenizes as trident does.
        vocab = gpt2_dir(build)
        if vocab is None:
            print("info: GPT-2's vocabulary not found (scripts/fetch-gpt2-vocab.sh): its tokenizer check is skipped")
        else:
            big = os.path.join(d, "gpt2_vocab")
            run(["train"] + tiny_args(d, n_embd=32) + ["--model.vocab_size=50304", "--train.steps=1",
                                                      f"--train.out_dir={big}"])
            out = f"{d}/gpt2-vocab.gguf"
            run(["export", "--checkpoint", big, "--out", out, "--tokenizer", "gpt2", "--vocab", vocab])
            texts = ["Hello, world! It's 2026: naïve café — 12345 tokens.\n\n  two  spaces\ttab",
                     " GPT-2's <|endoftext|> is text here; 日本語 and 🙂 too", "'s'll've 1 22 333 4444"]
            got = llama_cpp([{"op": "tokenize", "model": out, "texts": texts}])[0]
            for i, text in enumerate(texts):
                p = run(["tokenize", "--tokenizer", "gpt2", "--vocab", vocab, "--text", text])
                want = json.loads(p.stdout) if p.returncode == 0 else None
                check("ids" in got and got["ids"][i] == want and got["texts"][i] == text,
                      f"gpt2 vocabulary: llama.cpp tokenizes {text[:24]!r}... as trident "
                      f"({len(want or [])} tokens) and detokenizes it back")

        # tiktoken's rank files (cl100k_base: Llama 3's pattern, "llama-bpe"; o200k_base: "gpt-4o"):
        # the merges rebuilt from the ranks, the pre-tokenizer by split pattern.
        ranks = os.path.join(build, "data", "tiktoken")
        for encoding, vocab_size in (("cl100k_base", 100352), ("o200k_base", 200064)):
            if not os.path.isfile(os.path.join(ranks, encoding + ".tiktoken")):
                print(f"info: {encoding}.tiktoken not found (scripts/fetch-tiktoken-ranks.sh {ranks}): skipped")
                continue
            ckpt = os.path.join(d, encoding)
            run(["train"] + tiny_args(d, n_embd=32) + [f"--model.vocab_size={vocab_size}", "--train.steps=1",
                                                      f"--train.out_dir={ckpt}"])
            out = f"{d}/{encoding}.gguf"
            run(["export", "--checkpoint", ckpt, "--out", out, "--tokenizer", encoding, "--vocab", ranks])
            texts = ["Hello, world! It's 2026:\n\n  naïve café — 12345 tokens\r\n\tend",
                     "I'LL see you'll SEE 1234567 times; 日本語 🙂 <|endoftext|>"]
            got = llama_cpp([{"op": "tokenize", "model": out, "texts": texts}])[0]
            for i, text in enumerate(texts):
                p = run(["tokenize", "--tokenizer", encoding, "--vocab", ranks, "--text", text])
                want = json.loads(p.stdout) if p.returncode == 0 else None
                check("ids" in got and got["ids"][i] == want and got["texts"][i] == text,
                      f"{encoding}: llama.cpp tokenizes {text[:20]!r}... as trident ({len(want or [])} tokens) "
                      f"and detokenizes it back" + ("" if "ids" not in got or got["ids"][i] == want
                                                   else f": llama.cpp {got['ids'][i]}, trident {want}"))

        # SentencePiece: llama.cpp's "llama" vocabulary from the model's pieces, scores and kinds.
        spm_train = shutil.which("spm_train")
        if spm_train is None:
            print("info: spm_train not found (Debian's sentencepiece): the SentencePiece check is skipped")
        else:
            sp = os.path.join(d, "tokenizer")
            subprocess.run([spm_train, f"--input={d}/text.txt", f"--model_prefix={sp}", "--model_type=bpe",
                            "--vocab_size=300", "--byte_fallback=true", "--character_coverage=1.0",
                            "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
                            "--split_digits=true", "--bos_id=1", "--eos_id=2", "--unk_id=0", "--minloglevel=2"],
                           check=True, capture_output=True)
            run(["prepare", "--out", f"{d}/spdata", "--tokenizer", sp + ".model", f"{d}/text.txt"])
            args = [a.replace(f"{d}/data/", f"{d}/spdata/") for a in tiny_args(d, n_embd=64)
                    if not a.startswith(("--data.tokenizer", "--model.vocab_size"))]
            run(["train"] + args + models["llama"] + [
                f"--data.tokenizer={sp}.model", "--model.vocab_size=320", "--train.steps=300", "--optim.lr=0.01",
                f"--train.out_dir={d}/sp_llama"])
            out = f"{d}/sp-llama.gguf"
            run(["export", "--checkpoint", f"{d}/sp_llama", "--out", out])
            text = "line 3 says hello  world\n\tx é 🙂"
            got = llama_cpp([{"op": "tokenize", "model": out, "texts": [text]},
                             {"op": "generate", "model": out, "prompt": PROMPT, "tokens": 24}])
            p = run(["tokenize", "--tokenizer", sp + ".model", "--text", text])
            want = json.loads(p.stdout) if p.returncode == 0 else None
            check("ids" in got[0] and got[0]["ids"][0] == want and got[0]["texts"][0] == text,
                  f"sentencepiece: llama.cpp tokenizes {text!r} as trident ({len(want or [])} tokens, byte "
                  f"fallback included) and detokenizes it back")
            p = run(["tokenize", "--tokenizer", sp + ".model", "--text", PROMPT])
            ours = run(["sample", "--checkpoint", f"{d}/sp_llama", "--prompt", PROMPT, "--tokens", "24",
                        "--temperature", "0"]).stdout
            ours = ours[:-1] if ours.endswith("\n") else ours  # sample ends its text with a newline
            # Both texts are what the tokens add after the prompt, a leading space included (Note
            # [Decoding a continuation] in src/data/decode_continuation.h).
            check(got[1].get("prompt_ids") == json.loads(p.stdout) and
                  ours.startswith(PROMPT) and got[1].get("text") == ours[len(PROMPT):],
                  f"sentencepiece: llama.cpp's greedy 24 tokens are trident's ({got[1].get('text')!r})")

        # Bad input: a truncated file names the tensor; an unknown type names the allowed ones.
        whole = f"{d}/gpt2-f32.gguf"
        if os.path.isfile(whole):
            with open(whole, "rb") as f:
                data = f.read()
            with open(f"{d}/cut.gguf", "wb") as f:
                f.write(data[:len(data) - 100])
            got = llama_cpp([{"op": "generate", "model": f"{d}/cut.gguf", "prompt": PROMPT, "tokens": 1}])[0]
            check("error" in got, f"llama.cpp refuses the truncated file too: {str(got)[:120]}")
        cli.refused(["export", "--checkpoint", f"{d}/gpt2", "--out", f"{d}/x.gguf", "--type", "q5_k"],
                    "allowed: f32, f16, q8_0, q4_0")
        cli.refused(["export", "--checkpoint", f"{d}/gpt2", "--out", f"{d}/x.gguf", "--tokenizer", "gpt2",
                     "--vocab", d], "gpt2")
    return report("gguf_llama_cpp", failures)


if __name__ == "__main__":
    sys.exit(main())
