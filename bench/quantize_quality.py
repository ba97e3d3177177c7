#!/usr/bin/env python3
"""Perplexity of quantized weights on held-out text (issue #49's quality criterion): trains a
model on Tiny Shakespeare with `trident train`, quantizes it with `trident quantize` (int8 =
GGUF's Q8_0, int4 = Q4_0, nf4, w8a8 = int8 weights and activations), and evaluates every
directory and the fp32 checkpoint with `trident eval` on the same validation tokens (the last
10% of the text, never trained on). Criterion: int8's perplexity within 1% of fp32's, int4's
within 5%, w8a8's within 2% (nf4 reported alongside).

Defaults: a byte-level GPT-2 (vocabulary 256, so the quantized blocks hold nearly all the weights;
int8 takes the LM head too, the other schemes leave it fp32, embeddings stay fp32), L=4, NH=4, C=128, T=128, B=16, 400 steps, AdamW lr 3e-3,
warmup 40, cosine, 40 validation batches; --arch llama for the LLaMA family (SwiGLU 384, 2 kv
heads). Prints one JSON document (and writes it with --out); exits 1 when a criterion fails.
Needs shared/data/shakespeare.txt: prints a message and exits 77 (a skip for ctest) without it.

    bench/quantize_quality.py --trident build-dev/apps/trident [--arch gpt2|llama] [--steps N]
"""

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRITERIA = {"int8": 0.01, "int4": 0.05, "w8a8": 0.02}


def run(cmd, env):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident", default=os.path.join(REPO, "build-dev", "apps", "trident"))
    ap.add_argument("--text", default=os.path.join(REPO, "..", "shared", "data", "shakespeare.txt"))
    ap.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-batches", type=int, default=40)
    ap.add_argument("--work", default="", help="keep the run here (default: a temporary directory)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()
    if not os.path.isfile(args.text):
        print(f"skipping: needs {args.text} (shared/data's Tiny Shakespeare)")
        return 77
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE")
    with tempfile.TemporaryDirectory(prefix="trident_quantize_quality_") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        data = os.path.join(work, "data")
        if not os.path.exists(os.path.join(data, "val.bin")):
            run([args.trident, "prepare", args.text, "--out", data, "--tokenizer", "byte", "--val-fraction", "0.1"], env)
        model = ["--model.n_layer=4", "--model.n_head=4", "--model.n_embd=128", "--model.block_size=128",
                 "--model.vocab_size=256", "--model.dropout=0"]
        if args.arch == "llama":
            model = ["--model.arch=llama"] + model + ["--model.n_kv_heads=2", "--model.intermediate_size=384"]
        run_dir = os.path.join(work, f"{args.arch}_run")
        t0 = time.time()
        run([args.trident, "train"] + model + [
            "--data.tokenizer=byte", f"--data.train_file={data}/train.bin", f"--data.val_file={data}/val.bin",
            "--data.batch_size=16", "--data.seq_len=128", f"--train.steps={args.steps}", "--train.eval_interval=0",
            f"--train.threads={args.threads}", "--optim.lr=3e-3", "--lr_schedule.warmup_steps=40",
            f"--train.out_dir={run_dir}"], env)
        train_s = time.time() - t0
        ev = ["--batches", str(args.eval_batches), "--batch-size", "16", "--seq-len", "128"]
        results = {"fp32": json.loads(run([args.trident, "eval", "--checkpoint", run_dir] + ev, env))}
        sizes = {}
        for scheme in ("int8", "int4", "nf4", "w8a8"):
            out = os.path.join(work, f"{args.arch}_{scheme}")
            sizes[scheme] = json.loads(run([args.trident, "quantize", "--checkpoint", run_dir, "--scheme", scheme,
                                            "--out", out], env))
            results[scheme] = json.loads(run([args.trident, "eval", "--checkpoint", out] + ev, env))
    base = results["fp32"]["perplexity"]
    report = {"benchmark": "quantize_quality",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "arch": args.arch, "steps": args.steps, "train_seconds": train_s, "threads": args.threads,
              "eval_batches": args.eval_batches, "eval_tokens": args.eval_batches * 16 * 128,
              "corpus": "Tiny Shakespeare, bytes; validation: the last 10%", "results": {}}
    failed = []
    for name, r in results.items():
        row = {"val_loss": r["val_loss"], "perplexity": r["perplexity"],
               "perplexity_vs_fp32": r["perplexity"] / base - 1.0}
        if name in sizes:
            row["quantized_bytes"] = sizes[name]["quantized_bytes"]
            row["bytes_per_quantized_weight"] = sizes[name]["quantized_bytes"] / sizes[name]["quantized_parameters"]
        if name in CRITERIA:
            row["criterion"] = f"within {CRITERIA[name]:.0%}"
            row["meets"] = abs(row["perplexity_vs_fp32"]) <= CRITERIA[name]
            if not row["meets"]:
                failed.append(name)
        report["results"][name] = row
        print(f"{args.arch} {name}: perplexity {r['perplexity']:.4f} ({100 * row['perplexity_vs_fp32']:+.3f}% vs fp32)",
              file=sys.stderr)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if failed:
        print(f"FAIL: {', '.join(failed)} outside the criterion", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
