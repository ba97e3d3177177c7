#!/usr/bin/env python3
"""What this GPU does at GPT-2's shapes through PyTorch (cuBLAS, flash SDPA): the ceilings
trident's CUDA kernels are measured against. Prints one JSON object.

  gemm_bf16_8192        a large square bf16 GEMM (the card's practical peak)
  head_*                GPT-2's LM head for N rows at once: logits x @ w^T (N, V), dx = dlogits @ w,
                        dw = dlogits^T @ x (bf16 in, f32 out as trident accumulates it)
  sdpa_fwd / sdpa_bwd   causal flash attention, B x NH x T x HS in bf16

    bench/gpu_ceilings.py [--N 16384] [--C 768] [--V 50257] [--B 16 --NH 12 --T 1024 --HS 64]
"""

import argparse
import json

import torch
import torch.nn.functional as F


def timed(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps  # ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--N", type=int, default=16384)
    ap.add_argument("--C", type=int, default=768)
    ap.add_argument("--V", type=int, default=50257)
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--NH", type=int, default=12)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--HS", type=int, default=64)
    a = ap.parse_args()
    dev, bf = "cuda", torch.bfloat16
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}

    def rate(name, ms, flops):
        out[name] = {"ms": round(ms, 4), "tflops": round(flops / (ms * 1e-3) / 1e12, 1)}

    n = 8192
    x, y = torch.randn(n, n, device=dev, dtype=bf), torch.randn(n, n, device=dev, dtype=bf)
    rate("gemm_bf16_8192", timed(lambda: x @ y), 2.0 * n**3)
    del x, y

    N, C, V = a.N, a.C, a.V
    x = torch.randn(N, C, device=dev, dtype=bf) * 0.5
    w = torch.randn(V, C, device=dev, dtype=bf) * 0.02
    logits = torch.empty(N, V, device=dev, dtype=bf)
    dw = torch.zeros(V, C, device=dev, dtype=torch.float32)
    flops = 2.0 * N * C * V
    rate("head_logits", timed(lambda: torch.matmul(x, w.t(), out=logits)), flops)
    rate("head_dx", timed(lambda: logits @ w), flops)
    rate("head_dw_f32", timed(lambda: dw.add_((logits.t() @ x).float())), flops)
    rate("head_dw_bf16", timed(lambda: logits.t() @ x), flops)
    tgt = torch.randint(0, V, (N,), device=dev)
    lf = logits.float()
    rate("cross_entropy_f32_fwd", timed(lambda: F.cross_entropy(lf, tgt)), 0.0)
    del x, w, logits, dw, lf

    B, NH, T, HS = a.B, a.NH, a.T, a.HS
    q, k, v = (torch.randn(B, NH, T, HS, device=dev, dtype=bf, requires_grad=True) for _ in range(3))
    flops_f = 4.0 * B * NH * T * T * HS * 0.5
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        rate("sdpa_fwd", timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), flops_f)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        g = torch.randn_like(o)
        rate("sdpa_bwd", timed(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True)), 2.5 * flops_f)
    out["shapes"] = {"N": N, "C": C, "V": V, "B": B, "NH": NH, "T": T, "HS": HS}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
