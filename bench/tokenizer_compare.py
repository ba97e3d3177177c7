#!/usr/bin/env python3
"""trident's tokenizers beside OpenAI's tiktoken on the same text, one thread each, in one run.

Runs bench/tokenizer_bench (trident: gpt2, cl100k_base, o200k_base) and
bench/tiktoken_bench.mjs (the npm package tiktoken, tiktoken's Rust core compiled to
WebAssembly) on each file, and prints one JSON object: MB/s of encoding (CPU time, median of the
runs; trident's cold number is a fresh tokenizer's first encode, its warm one reuses the piece
cache), the token counts of both (they must be equal: the ids are tiktoken's), the ratio
trident / tiktoken, and the CPU (lscpu's model name and flags of interest).

Usage: bench/tokenizer_compare.py --build build --tiktoken-npm DIR --ranks DIR [--file F]... [--reps R]
  --tiktoken-npm  a directory where `npm install tiktoken@1.0.22` was run
  --ranks         cl100k_base.tiktoken and o200k_base.tiktoken (scripts/fetch-tiktoken-ranks.sh)
"""
import argparse
import json
import os
import subprocess
import sys

ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    info = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Model name", "CPU(s)"):
            info[key.strip()] = value.strip()
        if key.strip() == "Flags":
            info["avx512f"] = "avx512f" in value.split()
    return info


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(here, "..", "build"))
    parser.add_argument("--tiktoken-npm", required=True)
    parser.add_argument("--ranks", required=True)
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    files = args.file or [os.path.join(here, "..", "..", "shared", "data", "war_and_peace.txt")]

    cmd = [os.path.join(args.build, "bench", "tokenizer_bench"), "--tiktoken", args.ranks, "--reps", str(args.reps)]
    for f in files:
        cmd += ["--file", f]
    trident = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    report = {"benchmark": "tokenizer_compare", "threads": 1, "reps": args.reps, "cpu": cpu_model(), "results": []}
    for f, ours in zip(files, trident["results"]):
        theirs = json.loads(subprocess.run(
            ["node", os.path.join(here, "tiktoken_bench.mjs"), "--tiktoken", args.tiktoken_npm, "--file", f,
             "--reps", str(args.reps)], capture_output=True, text=True, check=True).stdout)
        report["tiktoken_npm_version"] = theirs["tiktoken_npm_version"]
        for enc in ENCODINGS:
            prefix = "gpt2" if enc == "gpt2" else enc
            tokens = ours["tokens"] if enc == "gpt2" else ours[f"{enc}_tokens"]
            t = theirs["results"][enc]
            row = {
                "file": os.path.basename(f), "bytes": ours["bytes"], "encoding": enc,
                "tokens_trident": tokens, "tokens_tiktoken": t["tokens"],
                "trident_cold_mb_per_s": round(ours[f"{prefix}_encode_cold_mb_per_s"], 2),
                "trident_warm_mb_per_s": round(ours[f"{prefix}_encode_warm_mb_per_s"], 2),
                "tiktoken_mb_per_s": round(t["encode_mb_per_s"], 2),
            }
            row["ratio_cold"] = round(row["trident_cold_mb_per_s"] / row["tiktoken_mb_per_s"], 2)
            row["ratio_warm"] = round(row["trident_warm_mb_per_s"] / row["tiktoken_mb_per_s"], 2)
            report["results"].append(row)
            if tokens != t["tokens"]:
                print(f"tokenizer_compare: {enc} on {f}: trident made {tokens} tokens, tiktoken {t['tokens']}",
                      file=sys.stderr)
                report["token_counts_differ"] = True
    print(json.dumps(report, indent=2))
    return 1 if report.get("token_counts_differ") else 0


if __name__ == "__main__":
    sys.exit(main())
