#!/usr/bin/env python3
"""`--tokenizer` on the command line (issue #22 item 6): names (byte, gpt2, cl100k_base, ...),
kinds with --vocab, and files or model directories detected from what they hold:

  - a directory with tokenizer.json (tests/data/hf_tokenizer), the file itself, and `hf --vocab`
    give the same ids;
  - a directory with a SentencePiece tokenizer.model (trained here with Debian's spm_train) gives
    spm_encode's ids; skipped without spm_train;
  - cl100k_base by name and by file gives tiktoken's ids, and `prepare` writes uint32 token
    files with it; a directory whose tokenizer.model is a rank file of 128,000 tokens is Llama 3
    (<|begin_of_text|> = 128000); skipped without the rank files
    (scripts/fetch-tiktoken-ranks.sh BUILD/data/tiktoken);
  - unknown names, empty directories and bad files are errors naming them, and so is a --file
    that is not UTF-8.

    cli_tokenizer_test.py TRIDENT REPO BUILD
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def main():
    trident, repo, build = sys.argv[1:4]
    failures, skipped = [], []

    def ids(args, cwd):
        p = run([trident, "tokenize"] + args, cwd)
        if p.returncode != 0:
            failures.append(f"tokenize {args}: exit {p.returncode}: {p.stderr.strip()}")
            return None
        return json.loads(p.stdout)

    def expect_error(args, cwd, *needles):
        p = run([trident] + args, cwd)
        if p.returncode == 0 or not all(n in p.stderr for n in needles):
            failures.append(f"{args}: expected an error naming {needles}, got exit {p.returncode}: {p.stderr.strip()}")

    with tempfile.TemporaryDirectory(prefix="trident_cli_tokenizer_test_") as d:
        hf_dir = os.path.join(repo, "tests", "data", "hf_tokenizer")
        text = ["--text", "hello world<|endoftext|>", "--allow-special"]
        want = [259, 262, 263, 264]
        for spec in (["--tokenizer", hf_dir], ["--tokenizer", os.path.join(hf_dir, "tokenizer.json")],
                     ["--tokenizer", "hf", "--vocab", hf_dir]):
            got = ids(spec + text, d)
            if got is not None and got != want:
                failures.append(f"{spec}: {got}, expected {want}")

        spm_train, spm_encode = shutil.which("spm_train"), shutil.which("spm_encode")
        if spm_train and spm_encode:
            corpus = os.path.join(d, "corpus.txt")
            with open(corpus, "w") as f:
                for i in range(3000):
                    f.write(f"the model {i % 17} reads line {'abc'[i % 3] * (1 + i % 4)} of the text.\n")
            model_dir = os.path.join(d, "llama2")
            os.makedirs(model_dir)
            p = run([spm_train, f"--input={corpus}", f"--model_prefix={model_dir}/m", "--model_type=bpe",
                     "--vocab_size=300", "--byte_fallback=true", "--minloglevel=2"], d)
            assert p.returncode == 0, p.stderr
            os.rename(f"{model_dir}/m.model", f"{model_dir}/tokenizer.model")
            sample = "the model reads caf\u00e9 \u4e2d 12"
            p = subprocess.run([spm_encode, f"--model={model_dir}/tokenizer.model", "--output_format=id"],
                               input=sample + "\n", capture_output=True, text=True, timeout=60)
            want_spm = [int(x) for x in p.stdout.split()]
            got = ids(["--tokenizer", model_dir, "--text", sample], d)
            if got is not None and got != want_spm:
                failures.append(f"sentencepiece dir: {got}, spm_encode: {want_spm}")
        else:
            skipped.append("sentencepiece (no spm_train/spm_encode: apt-get install sentencepiece)")

        ranks = os.path.join(build, "data", "tiktoken")
        cl100k = os.path.join(ranks, "cl100k_base.tiktoken")
        if os.path.exists(cl100k):
            for spec in (["--tokenizer", "cl100k_base", "--vocab", ranks], ["--tokenizer", cl100k]):
                got = ids(spec + ["--text", "Hello, world!"], d)
                if got is not None and got != [9906, 11, 1917, 0]:
                    failures.append(f"{spec}: {got}, tiktoken: [9906, 11, 1917, 0]")
            doc = os.path.join(d, "doc.txt")
            with open(doc, "w") as f:
                f.write("A short document for cl100k_base.\n")
            p = run([trident, "prepare", "--out", os.path.join(d, "cl100k"), "--tokenizer", cl100k,
                     "--val-fraction", "0", doc], d)
            if p.returncode != 0 or "cl100k_base" not in p.stdout:
                failures.append(f"prepare with cl100k_base: exit {p.returncode}: {p.stdout} {p.stderr}")
            else:
                with open(os.path.join(d, "cl100k", "train.bin"), "rb") as f:
                    if f.read(8) != b"TRITOK32":
                        failures.append("prepare with cl100k_base did not write a uint32 token file")
            llama3 = os.path.join(d, "llama3")
            os.makedirs(llama3)
            with open(os.path.join(ranks, "o200k_base.tiktoken")) as src, \
                    open(os.path.join(llama3, "tokenizer.model"), "w") as dst:
                for _ in range(128000):
                    dst.write(src.readline())
            got = ids(["--tokenizer", llama3, "--text", "<|begin_of_text|>hi<|eot_id|>", "--allow-special"], d)
            if got is not None and (got[0] != 128000 or got[-1] != 128009):
                failures.append(f"llama3 dir: {got}, expected 128000 ... 128009")
        else:
            skipped.append(f"cl100k_base/llama3 ({cl100k} missing: scripts/fetch-tiktoken-ranks.sh {ranks})")

        expect_error(["tokenize", "--tokenizer", "nosuch", "--text", "x"], d,
                     "unknown tokenizer 'nosuch' (allowed: byte, gpt2, cl100k_base")
        empty = os.path.join(d, "empty")
        os.makedirs(empty)
        expect_error(["tokenize", "--tokenizer", empty, "--text", "x"], d,
                     f"no tokenizer in '{empty}': expected tokenizer.json")
        bad = os.path.join(d, "bad")
        os.makedirs(bad)
        with open(os.path.join(bad, "tokenizer.json"), "w") as f:
            f.write('{"model": {"type": "WordPiece", "vocab": {}}}')
        expect_error(["tokenize", "--tokenizer", bad, "--text", "x"], d,
                     os.path.join(bad, "tokenizer.json") + ": model.type: \"WordPiece\" is not supported")
        expect_error(["tokenize", "--tokenizer", "hf", "--text", "x"], d, "reads its file from data.vocab_dir / --vocab")
        not_utf8 = os.path.join(d, "not_utf8.txt")
        with open(not_utf8, "wb") as f:
            f.write(b"\xff\xfe bad utf8")
        expect_error(["tokenize", "--tokenizer", hf_dir, "--file", not_utf8], d,
                     f"{not_utf8}: tokenizer.json tokenizer: the text is not valid UTF-8")

    for s in skipped:
        print(f"skipped: {s}")
    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        return 1
    print("cli_tokenizer: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
