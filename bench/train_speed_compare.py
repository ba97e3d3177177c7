#!/usr/bin/env python3
"""GPT-2 training speed and memory, trident vs PyTorch, side by side (issue #4's benchmark).

For each config, alternating trident and PyTorch `--reps` times (so a noisy neighbour hits
both), each run in its own process: `--warmup` untimed steps, then `--steps` timed steps of
forward + backward + clip_grad_norm_ + AdamW + zero_grad on random tokens, same thread count,
model, batch, precision (fp32; `--precision bf16` runs trident in bf16 against PyTorch fp32)
and optimizer. Reports per framework the median over runs of
each run's median step: ms/step, tokens/s, peak RSS (the process's, from wait4), and the
ratios trident/PyTorch; and the model FLOPs utilization of each against the SGEMM rate
trident measures on this machine (6 x params + 12 x L x C x T FLOPs per token, the PaLM
count, params including the tied embedding).

  configs  tiny   L=4  C=256 NH=4  T=256  B=8
           small  L=6  C=512 NH=8  T=512  B=4
           124M   L=12 C=768 NH=12 T=1024 B=4     (all V=50257)

PyTorch's side is tests/parity/gpt2_torch.py's nanoGPT-style GPT-2 (Debian's torch 1.13:
unfused attention, as 1.13 has no scaled_dot_product_attention), torch.set_num_threads and
OMP_WAIT_POLICY=PASSIVE as trident.

    bench/train_speed_compare.py --trident-bench build/bench/train_step_bench [--configs tiny,small]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {
    "tiny": dict(L=4, C=256, NH=4, T=256, B=8),
    "small": dict(L=6, C=512, NH=8, T=512, B=4),
    "124M": dict(L=12, C=768, NH=12, T=1024, B=4),
}
V = 50257


def torch_worker(args):
    """One PyTorch run, in this process; prints one JSON line."""
    import torch
    sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
    from gpt2_torch import GPT2
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    c = CONFIGS[args.config]
    model = GPT2(c["L"], c["NH"], c["C"], c["T"], V)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif "ln_" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
    model.train()
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    step_ms, losses = [], []
    for s in range(args.warmup + args.steps):
        idx = torch.randint(0, V, (c["B"], c["T"]), generator=g)
        targets = torch.randint(0, V, (c["B"], c["T"]), generator=g)
        t0 = time.perf_counter()
        loss = model(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
        print(f"step {s + 1}: {step_ms[-1]:.0f} ms, loss {losses[-1]:.4f}", file=sys.stderr, flush=True)
    ms = statistics.median(step_ms[args.warmup:])
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "params": sum(p.numel() for p in params),
                      "step_ms": step_ms, "losses": losses, "median_step_ms": ms,
                      "tokens_per_s": c["B"] * c["T"] / (ms / 1e3)}))


def run_child(cmd, env):
    """Runs cmd; returns (its last stdout line as JSON, its peak RSS in MiB)."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mib"] = usage.ru_maxrss / 1024.0
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident-bench", default=os.path.join(REPO, "build", "bench", "train_step_bench"))
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch (Debian's python3-torch)")
    ap.add_argument("--configs", default="tiny,small,124M")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="timed steps per run (0: 5 tiny/small, 3 for 124M)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--checkpointing", default="none", help="trident's activation checkpointing")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                    help="trident's precision (PyTorch's side stays fp32: the issue's baseline)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config", default="tiny", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args)

    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(args.threads))
    report = {"benchmark": "train_speed_compare", "threads": args.threads, "trident_precision": args.precision,
              "pytorch_precision": "fp32",
              "trident_checkpointing": args.checkpointing, "configs": {}}
    sgemm = None
    cpu = {}  # oneDNN's name for the CPU's ISA and trident's bf16 GEMM engine (and its rate)
    for name in args.configs.split(","):
        c = CONFIGS[name]
        steps = args.steps or (3 if name == "124M" else 5)
        runs = {"trident": [], "pytorch": []}
        for rep in range(args.reps):
            tri_cmd = [args.trident_bench, "--layers", str(c["L"]), "--embd", str(c["C"]), "--heads", str(c["NH"]),
                       "--vocab", str(V), "--T", str(c["T"]), "--B", str(c["B"]), "--steps", str(steps),
                       "--warmup", str(args.warmup), "--threads", str(args.threads),
                       "--checkpointing", args.checkpointing, "--precision", args.precision] + (
                           ["--sgemm"] if sgemm is None else [])
            r = run_child(tri_cmd, env)
            if sgemm is None:
                sgemm = r["sgemm_gflops"]
                cpu = {k: r[k] for k in ("cpu_isa", "f32_gemm", "bf16_gemm", "bf16_gemm_gflops") if k in r}
            runs["trident"].append(r)
            runs["pytorch"].append(run_child([args.python, os.path.abspath(__file__), "--torch-worker", "--config",
                                              name, "--steps", str(steps), "--warmup", str(args.warmup),
                                              "--threads", str(args.threads)], env))
        L, C, T, B = c["L"], c["C"], c["T"], c["B"]
        entry = {"shape": dict(c, V=V), "timed_steps_per_run": steps, "reps": args.reps}
        for fw, rs in runs.items():
            ms = statistics.median(r["median_step_ms"] for r in rs)
            flops_per_token = 6 * rs[0]["params"] + 12 * L * C * T
            tps = B * T / (ms / 1e3)
            entry[fw] = {"ms_per_step": ms, "tokens_per_s": tps,
                         "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
                         "params": rs[0]["params"],
                         "mfu_vs_sgemm": flops_per_token * tps / (sgemm * 1e9),
                         "per_run_step_ms": [r["median_step_ms"] for r in rs]}
            if fw == "trident" and "bf16_gemm_gflops" in cpu:
                entry[fw]["mfu_vs_bf16_gemm"] = flops_per_token * tps / (cpu["bf16_gemm_gflops"] * 1e9)
        entry["tokens_per_s_ratio"] = entry["trident"]["tokens_per_s"] / entry["pytorch"]["tokens_per_s"]
        entry["peak_rss_ratio"] = entry["trident"]["peak_rss_mib"] / entry["pytorch"]["peak_rss_mib"]
        report["configs"][name] = entry
        print(f"{name}: trident {entry['trident']['tokens_per_s']:.0f} tok/s, PyTorch "
              f"{entry['pytorch']['tokens_per_s']:.0f} tok/s ({entry['tokens_per_s_ratio']:.2f}x); peak RSS "
              f"{entry['trident']['peak_rss_mib']:.0f} vs {entry['pytorch']['peak_rss_mib']:.0f} MiB",
              file=sys.stderr, flush=True)
    report["sgemm_gflops"] = sgemm
    report.update(cpu)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
