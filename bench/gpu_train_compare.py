#!/usr/bin/env python3
"""GPT-2 training speed on one GPU, trident vs PyTorch, side by side (issue #7's benchmark).

For each model size and batch, alternating trident and PyTorch `--reps` times, each run in its
own process: `--warmup` untimed steps, then `--steps` timed steps of forward + backward +
clip_grad_norm_ + AdamW + zero_grad on random tokens, bf16 compute with fp32 optimizer
state. Prints one JSON object: per framework the median over runs of each run's median step
(ms/step, tokens/s, MFU against `--peak-tflops`, 989 for an H100's dense bf16), and the
ratio trident/PyTorch.

trident:  build/bench/train_step_bench --device cuda --precision bf16 (bf16 weights and
          activations, fp32 master weights, the CUDA backend's kernels).
PyTorch:  the nanoGPT model below with F.scaled_dot_product_attention (flash attention),
          torch.autocast(bfloat16) over fp32 parameters, fused AdamW, and torch.compile
          unless --no-compile: what a PyTorch user would run.

  sizes  124M  L=12 C=768  NH=12        350M  L=24 C=1024 NH=16     (T=1024, V=50257)

    bench/gpu_train_compare.py --trident-bench build/bench/train_step_bench --sizes 124M,350M --batches 16,32
"""

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys

SIZES = {"124M": dict(L=12, C=768, NH=12), "350M": dict(L=24, C=1024, NH=16), "tiny": dict(L=2, C=128, NH=4)}
V = 50257


def flops_per_token(L, C, T, params):
    return 6.0 * params + 12.0 * L * C * T  # PaLM's count, as train_step_bench


def build_torch_gpt(L, C, NH, T, compile=True):
    """The PyTorch side's model on the GPU: (model, step_fn, params); step_fn is torch.compile(model)
    unless compile is False. Also used by bench/gpu_kernel_profile.py."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            shape = (x.size(0), x.size(1), NH, C // NH)
            q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(x.shape))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
            for b in self.h:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
            return F.cross_entropy(logits.view(-1, V).float(), targets.view(-1))

    torch.manual_seed(0)
    model = GPT()
    for name, p in model.named_parameters():  # GPT-2's init (as trident's): N(0, 0.02), zero biases, unit norms
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif p.dim() == 1:
            nn.init.ones_(p)
        else:
            nn.init.normal_(p, std=0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02)
    model = model.cuda()
    params = sum(p.numel() for p in model.parameters())
    return model, (torch.compile(model) if compile else model), params


def torch_train_step(model, step_fn, opt, idx, tgt):
    """One step as trident's: bf16 autocast forward, backward, clip_grad_norm_(1.0), AdamW, zero_grad."""
    import torch
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = step_fn(idx, tgt)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def timed_torch_steps(model, step_fn, opt, B, T, steps, fresh_batches=True):
    """`steps` steps of torch_train_step on random tokens (new ones each step, or one batch),
    each timed by CUDA events: (ms per step, losses, the last batch's idx and tgt)."""
    import torch
    times, losses = [], []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    idx = tgt = None
    for s in range(steps):
        if fresh_batches or idx is None:
            idx = torch.randint(0, V, (B, T), device="cuda")
            tgt = torch.randint(0, V, (B, T), device="cuda")
        torch.cuda.synchronize()
        start.record()
        loss = torch_train_step(model, step_fn, opt, idx, tgt)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
        losses.append(loss.item())
    return times, losses, idx, tgt


def torch_worker(args):
    import torch

    c = SIZES[args.size]
    L, C, NH, T, B = c["L"], c["C"], c["NH"], args.T, args.batch
    model, step_fn, params = build_torch_gpt(L, C, NH, T, compile=not args.no_compile)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    times, losses, _, _ = timed_torch_steps(model, step_fn, opt, B, T, args.warmup + args.steps)
    ms = statistics.median(times[args.warmup:])
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "compiled": not args.no_compile,
                      "params": params, "median_step_ms": ms, "tokens_per_s": B * T / (ms / 1e3),
                      "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30, "losses": losses}))


def run_json(cmd, timeout, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s: {' '.join(cmd)}", "returncode": None}
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout)[-2000:], "returncode": p.returncode}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident-bench", default="build/bench/train_step_bench")
    ap.add_argument("--sizes", default="124M")
    ap.add_argument("--batches", default="16", help="comma-separated batch sizes to try")
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--only", choices=["both", "trident", "torch"], default="both")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run before it counts as failed")
    ap.add_argument("--commit", default="", help="trident's commit, recorded in the JSON")
    # worker mode
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--size", default="124M", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=16, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return torch_worker(args)

    results = []
    for size in args.sizes.split(","):
        c = SIZES[size]
        for batch in [int(b) for b in args.batches.split(",")]:
            runs = {"trident": [], "pytorch": []}
            for _ in range(args.reps):
                if args.only in ("both", "trident"):
                    runs["trident"].append(run_json([
                        args.trident_bench, "--device", "cuda", "--precision", "bf16", "--layers", str(c["L"]),
                        "--embd", str(c["C"]), "--heads", str(c["NH"]), "--vocab", str(V), "--T", str(args.T),
                        "--B", str(batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
                        "--peak-tflops", str(args.peak_tflops)], args.timeout))
                if args.only in ("both", "torch"):
                    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--size", size, "--batch", str(batch),
                           "--T", str(args.T), "--steps", str(args.steps), "--warmup", str(args.warmup)]
                    if args.no_compile:
                        cmd.append("--no-compile")
                    runs["pytorch"].append(run_json(cmd, args.timeout))
            row = {"size": size, "T": args.T, "B": batch}
            for fw, rs in runs.items():
                ok = [r for r in rs if "median_step_ms" in r]
                if not rs:
                    continue
                if not ok:
                    row[fw] = {"error": rs[-1].get("error", "?")}
                    continue
                ms = statistics.median(r["median_step_ms"] for r in ok)
                params = ok[0]["params"]
                tps = batch * args.T / (ms / 1e3)
                row[fw] = {"median_step_ms": ms, "tokens_per_s": tps, "params": params,
                           "mfu": flops_per_token(c["L"], c["C"], args.T, params) * tps / (args.peak_tflops * 1e12),
                           "first_loss": ok[0].get("losses", [math.nan])[0],
                           # trident: its allocator's peak bytes in use; PyTorch: max_memory_allocated
                           "peak_mem_gib": ok[0]["allocator_peak_mib"] / 1024 if "allocator_peak_mib" in ok[0]
                           else ok[0].get("peak_mem_gib")}
                if "allocator_peak_mib_by_category" in ok[0]:
                    row[fw]["peak_mib_by_category"] = ok[0]["allocator_peak_mib_by_category"]
            if "median_step_ms" in row.get("trident", {}) and "median_step_ms" in row.get("pytorch", {}):
                row["tokens_per_s_ratio"] = row["trident"]["tokens_per_s"] / row["pytorch"]["tokens_per_s"]
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"peak_tflops": args.peak_tflops, "machine": machine_info(), "commit": args.commit,
                      "pytorch_settings": {"compile": not args.no_compile, "attention": "F.scaled_dot_product_attention",
                                           "autocast": "bfloat16", "optimizer": "AdamW(fused=True)",
                                           "clip_grad_norm": 1.0},
                      "steps": args.steps, "warmup": args.warmup, "reps": args.reps, "results": results}, indent=1))


def machine_info():
    """The GPU, its driver, PyTorch's version and the date, for bench/results/."""
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30).stdout.strip().split(", ")
        info.update(gpu=q[0], driver=q[1], memory=q[2])
    except (OSError, IndexError, subprocess.TimeoutExpired) as e:
        info["gpu_error"] = str(e)
    try:
        import torch
        info["pytorch"] = torch.__version__
        info["cuda"] = torch.version.cuda
    except ImportError:
        pass
    return info


if __name__ == "__main__":
    main()
