#!/usr/bin/env python3
"""Generation with a KV cache, trident vs PyTorch at PyTorch's best settings (issue #49).

For each config, precision and batch size B: trident's bench/decode_bench and a PyTorch 1.13
worker (this file with --worker, run by Debian's /usr/bin/python3, the only interpreter that
imports its torch), each in its own process with the same threads, model shape, prompts and
measurement, then the ratios. Both sides take the same shape flags (decode_bench's:
[--arch llama --kv-heads K --intermediate I] --layers L --embd C --heads NH --vocab V, with
--B --prompt --tokens --reps --threads --precision), so a worker run can be repeated by hand
with a decode_bench command line.

The measurement (decode_bench's): B requests of P prompt tokens (token b, t is
(7919 b + 104729 t) mod V), N new tokens each, greedy, randomly initialized weights. run(n)
generates n tokens per request; one untimed run(2) warms up, then --reps times run(1) and
run(N). TTFT = the median run(1) (every request's prefill and first token), decode time = the
median run(N) - TTFT, decode tokens/s = B (N - 1) / decode time, and decode GB/s = (weight
bytes + 2 L KV HS B (P + (N - 1) / 2) cache bytes per step) x (N - 1) / decode time: a decode
step reads every weight once and the cache up to half-way through the new tokens; the
machine's memory bandwidth is its ceiling. (The median is the upper one of an even count, as
decode_bench takes it.)

Rounds: each row runs --rounds processes per side (3 by default) in turns with its peer's (trident
then PyTorch, PyTorch then trident, ...). The CPUs these benchmarks ran on drift in speed by up to
2x over minutes (Zen 5 VMs: the same binary's prefill took 46-57 ms in one quarter hour and 77-112
ms in another), so a ratio is fair only between runs next to each other: each row's ratio is the
median of its rounds' ratios, its timings the medians of each side's rounds, and every round is
in the JSON. An int4 row (PyTorch has no int4) is compared with PyTorch's fp32 rounds of the row.

The PyTorch side: tests/parity/gpt2_torch.py's GPT-2 and llama_torch.py's LLaMA modules (the
shapes and initialization of bench/train_speed_compare.py: N(0, 0.02) matrices, norms 1,
biases 0), run by a KV-cache forward of this file in plain PyTorch under torch.inference_mode():
a preallocated cache per layer (B, KV, P + N, HS) in the model's dtype, the step's keys and
values written in place, attention of the step's queries over the cache slice by matmul +
softmax (1.13 has no scaled_dot_product_attention), causal mask only in the prefill; RoPE from
a cos/sin table computed once; grouped-query attention by viewing each kv head's query heads
as one (B, KV, groups T, HS) batch against the cache (--torch-gqa group, no copy) or by
repeat_interleave of the cached keys and values (--torch-gqa repeat, a copy of the cache per
layer and step); the final norm and the LM head on each row's last token only; argmax. The B
prompts are prefilled in one (B, P) forward (trident's engine prefills each request on its own,
then decodes all B rows together). torch.set_flush_denormal(True) as trident flushes
denormals. --precisions bf16: both sides' weights and cache in bf16 (PyTorch: model.to(bf16)).

--schemes none,int8,int4 (fp32 only): trident's side also runs with its linear layers quantized
(decode_bench --scheme: GGUF's Q8_0 / Q4_0 weights, fused decode kernels; the LM head and the
embeddings stay fp32), compared with trident's fp32 run ("vs_trident_fp32") and with PyTorch. PyTorch
1.13 has no CPU int4 decode, so int4 is compared with PyTorch's fp32; int8 also with PyTorch's dynamic
int8 (torch.ao.quantization.quantize_dynamic over the blocks' nn.Linear layers, GPT-2's Conv1D
turned into nn.Linear first, the head kept fp32 as trident keeps it; fbgemm quantizes each
activation per tensor on the fly, so it is W8A8, not weight-only) when --torch-int8 dynamic (the
default) and it runs.

PyTorch's settings: train_speed_compare.py's candidates (allocator glibc / tcmalloc / jemalloc
by LD_PRELOAD, OMP_WAIT_POLICY PASSIVE / ACTIVE, ATEN_CPU_CAPABILITY default / avx512 on an
AVX-512 CPU, the installed OpenBLAS builds, OPENBLAS_CORETYPE default / SkylakeX on an AVX-512
CPU) and its coordinate search from
glibc/PASSIVE/default/system BLAS: each other value of an axis is tried with the best so far of
the others in a duel with the best so far, four short worker runs in turns (best, challenger,
challenger, best; --probe-batch rows, --probe-tokens new tokens, the config's prompt, one rep
each), each side judged by the faster of its two run(N) times, and wins only if at least
--probe-margin (3%) faster. (Single runs picked settings by the machine's drift: LLaMA-125M's
batch-1 probe once chose glibc's malloc at 475 ms over tcmalloc at 832 ms, and PyTorch's TTFT
in the rows that followed was 263-352 ms against 166-185 ms the day before.) Probed per (config, precision, batch) at the batch's own B (--probe-batch N: once
per (config, precision) at B=N); every trial is printed and in the JSON.
`--torch-settings allocator=tcmalloc,wait=PASSIVE` fixes them (axes left out: the defaults) and
skips the probe. trident runs with nothing preloaded and OMP_WAIT_POLICY=PASSIVE. Both sides
start from the caller's environment less train_speed_compare.py's STRIPPED_ENV, with
OMP_NUM_THREADS=--threads.

  configs  gpt2-124M (= 124M)  L=12 C=768 NH=12 V=50257 (tied head, learned positions)
           llama125M           L=12 C=768 NH=12 KV=4 SwiGLU I=2048 V=32000 (untied head)
           tiny                L=2 C=64 NH=4 V=512 (GPT-2)          for smoke tests
           tiny-llama          L=2 C=64 NH=4 KV=2 I=128 V=512

Usage:
    nice -n 10 bench/decode_compare.py [--trident-bench build-dev/bench/decode_bench]
        [--configs gpt2-124M,llama125M] [--precisions fp32[,bf16]] [--batch 1,8] [--prompt 128]
        [--tokens 64] [--reps 3] [--rounds 3] [--threads 2] [--torch-settings allocator=tcmalloc,wait=PASSIVE]
        [--torch-gqa group|repeat] [--schemes none,int8,int4] [--torch-int8 dynamic|none] [--out FILE]
    bench/decode_compare.py --configs tiny,tiny-llama --batch 1,2 --prompt 16 --tokens 8 --reps 1
    /usr/bin/python3 bench/decode_compare.py --worker [decode_bench's flags] [--gqa group|repeat] [--check]
        (--check: also compares the cached logits with a forward over the whole sequence)

Prints one JSON document on stdout (progress and the children's stderr on stderr): per config,
precision and B both sides' results, "ttft_speedup" (PyTorch's TTFT / trident's) and
"decode_tokens_per_s_ratio" (trident's / PyTorch's), trident's decode GB/s, PyTorch's settings
and probe, the CPU (lscpu's model name), threads and the date.
"""

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_speed_compare as tsc  # noqa: E402  (the harness: candidates, environments, run_child)

REPO = tsc.REPO
SHAPE_KEYS = ("arch", "L", "C", "NH", "KV", "I", "V")  # train_speed_compare's T and B are training's


def model_shape(c):
    return {k: v for k, v in dict(c, V=tsc.vocab(c)).items() if k in SHAPE_KEYS}


CONFIGS = {
    "gpt2-124M": model_shape(tsc.CONFIGS["124M"]),
    "124M": model_shape(tsc.CONFIGS["124M"]),
    "llama125M": model_shape(tsc.CONFIGS["llama125M"]),
    "tiny": dict(L=2, C=64, NH=4, V=512),
    "tiny-llama": dict(arch="llama", L=2, C=64, NH=4, KV=2, I=128, V=512),
}


def shape_flags(c):
    """The shape flags both decode_bench and the worker take."""
    family = ["--arch", "llama", "--kv-heads", str(c["KV"]), "--intermediate", str(c["I"])] \
        if c.get("arch") == "llama" else []
    return family + ["--layers", str(c["L"]), "--embd", str(c["C"]), "--heads", str(c["NH"]),
                     "--vocab", str(c.get("V", tsc.V))]


def run_flags(B, prompt, tokens, reps, threads, precision):
    return ["--B", str(B), "--prompt", str(prompt), "--tokens", str(tokens), "--reps", str(reps),
            "--threads", str(threads), "--precision", precision]


# ---------------------------------------------------------------------------------------
# the PyTorch worker


def worker_parser():
    ap = argparse.ArgumentParser(description="the PyTorch side of decode_compare.py (decode_bench's flags)")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--kv-heads", type=int, default=0, help="0: --heads")
    ap.add_argument("--intermediate", type=int, default=0, help="0: 8/3 C rounded up to a multiple of 256")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--gqa", default="group", choices=["group", "repeat"])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--dynamic-int8", action="store_true",
                    help="quantize_dynamic's int8 nn.Linear for the blocks' layers (the head stays fp32)")
    return ap


def dynamic_int8(torch, model):
    """The blocks' linear layers as PyTorch 1.13's dynamic int8 (fbgemm); GPT-2's Conv1D first
    becomes an nn.Linear with the transposed weight. Returns the model and its weight bytes (int8
    weights counted at 1 byte, their scales ignored)."""
    nn = torch.nn
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if type(child).__name__ == "Conv1D":
                w = child.weight  # (in, out)
                lin = nn.Linear(w.shape[0], w.shape[1], bias=getattr(child, "bias", None) is not None)
                with torch.no_grad():
                    lin.weight.copy_(w.t())
                    if lin.bias is not None:
                        lin.bias.copy_(child.bias)
                setattr(parent, child_name, lin)
    names = {n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n != "lm_head"}
    linear_bytes = sum(m.weight.numel() * 3 for n, m in model.named_modules() if n in names)  # 4 -> 1 byte
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) - linear_bytes
    model = torch.ao.quantization.quantize_dynamic(model, names, dtype=torch.qint8)
    return model, weight_bytes


def build_torch_model(a, block_size):
    """The parity tests' module of the shape, train_speed_compare.py's initialization."""
    import torch
    sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
    torch.manual_seed(0)
    if a.arch == "llama":
        from llama_torch import Llama
        model = Llama(argparse.Namespace(
            n_layer=a.layers, n_head=a.heads, n_kv_heads=a.kv_heads or a.heads, n_embd=a.embd,
            intermediate_size=a.intermediate or (8 * a.embd // 3 + 255) // 256 * 256, block_size=block_size,
            vocab_size=a.vocab, rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, qkv_bias=False,
            rope_scaling_factor=0.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
            rope_original_max_position=8192, sliding_window=0))
    else:
        from gpt2_torch import GPT2
        model = GPT2(a.layers, a.heads, a.embd, block_size, a.vocab)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif ("ln_" in name or "norm" in name) and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
    return model


class CachedLM:
    """A KV-cache forward over the parity module's weights: step(idx (B, T), pos) writes the
    tokens' keys and values at positions pos .. pos + T - 1 of every layer's cache and returns
    the logits (B, V) of each row's last token."""

    def __init__(self, model, a, B, capacity, dtype, gqa):
        import torch
        self.torch, self.m, self.gqa = torch, model, gqa
        self.llama = a.arch == "llama"
        self.NH, self.C = a.heads, a.embd
        self.KV = (a.kv_heads or a.heads) if self.llama else a.heads
        self.HS = a.embd // a.heads
        self.scale = 1.0 / math.sqrt(self.HS)
        shape = (B, self.KV, capacity, self.HS)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(a.layers)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(a.layers)]
        self.cache_bytes = 2 * a.layers * B * self.KV * capacity * self.HS * self.k[0].element_size()
        if self.llama:  # RoPE's cos/sin for every position, once
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.HS, 2).float() / self.HS))  # llama_torch's
            freqs = torch.outer(torch.arange(capacity, dtype=torch.float32), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.cos, self.sin = emb.cos().to(dtype), emb.sin().to(dtype)

    def attend(self, q, layer, pos, T):
        """q (B, NH, T, HS) over the layer's cache up to pos + T -> (B, T, C)."""
        torch = self.torch
        B, S, groups = q.shape[0], pos + T, self.NH // self.KV
        K, V = self.k[layer][:, :, :S], self.v[layer][:, :, :S]
        if groups > 1 and self.gqa == "repeat":
            K, V = K.repeat_interleave(groups, dim=1), V.repeat_interleave(groups, dim=1)
            groups = 1
        q = q.reshape(B, K.shape[1], groups * T, self.HS)  # query heads of one kv head together
        att = torch.matmul(q, K.transpose(-2, -1)) * self.scale  # (B, KV', groups T, S)
        if T > 1:  # query t (position pos + t) sees keys j <= pos + t
            mask = torch.arange(S)[None, :] > (pos + torch.arange(T))[:, None]
            att = att.view(B, K.shape[1], groups, T, S).masked_fill(mask, float("-inf")).view(att.shape)
        y = torch.matmul(torch.softmax(att, dim=-1), V)  # (B, KV', groups T, HS)
        return y.view(B, self.NH, T, self.HS).transpose(1, 2).reshape(B, T, self.C)

    def step(self, idx, pos):
        torch, m = self.torch, self.m
        B, T = idx.shape
        NH, KV, HS = self.NH, self.KV, self.HS
        if self.llama:
            x = m.embed_tokens(idx)
            cos, sin = self.cos[pos:pos + T], self.sin[pos:pos + T]
            for l, blk in enumerate(m.layers):
                a = blk.self_attn
                h = blk.input_layernorm(x)
                q = a.q_proj(h).view(B, T, NH, HS).transpose(1, 2)
                k = a.k_proj(h).view(B, T, KV, HS).transpose(1, 2)
                q = q * cos + rotate_half(torch, q) * sin
                self.k[l][:, :, pos:pos + T] = k * cos + rotate_half(torch, k) * sin
                self.v[l][:, :, pos:pos + T] = a.v_proj(h).view(B, T, KV, HS).transpose(1, 2)
                x = x + a.o_proj(self.attend(q, l, pos, T))
                x = x + blk.mlp(blk.post_attention_layernorm(x))
            return m.lm_head(m.norm(x[:, -1]))
        x = m.wte(idx) + m.wpe(torch.arange(pos, pos + T))
        for l, blk in enumerate(m.h):
            a = blk.attn
            q, k, v = a.c_attn(blk.ln_1(x)).split(self.C, dim=2)
            self.k[l][:, :, pos:pos + T] = k.view(B, T, NH, HS).transpose(1, 2)
            self.v[l][:, :, pos:pos + T] = v.view(B, T, NH, HS).transpose(1, 2)
            x = x + a.c_proj(self.attend(q.view(B, T, NH, HS).transpose(1, 2), l, pos, T))
            x = x + blk.mlp(blk.ln_2(x))
        return torch.matmul(m.ln_f(x[:, -1]), m.wte.weight.t())  # tied head


def rotate_half(torch, x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def torch_worker(argv):
    """One PyTorch run in this process; prints one JSON line (decode_bench's fields and more)."""
    a = worker_parser().parse_args(argv)
    import torch
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    capacity = a.prompt + a.tokens
    block_size = max(1024, capacity)  # decode_bench's (GPT-2's position table: its weight bytes)
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    model = build_torch_model(a, block_size).to(dtype).eval()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # a tied head once
    if a.dynamic_int8:
        model, weight_bytes = dynamic_int8(torch, model)
    lm = CachedLM(model, a, a.B, capacity, dtype, a.gqa)
    prompts = torch.tensor([[(b * 7919 + t * 104729) % a.vocab for t in range(a.prompt)] for b in range(a.B)])

    def generate(n):
        tok = lm.step(prompts, 0).argmax(-1)
        out = [tok]
        for i in range(n - 1):
            tok = lm.step(tok.view(-1, 1), a.prompt + i).argmax(-1)
            out.append(tok)
        return torch.stack(out, 1)

    def run(n):
        t0 = time.perf_counter()
        generate(n)
        return time.perf_counter() - t0

    def median(v):
        return sorted(v)[len(v) // 2]

    with torch.inference_mode():
        if a.check:
            check(lm, prompts, generate, a)
        run(2)  # warm-up
        print("step warm-up done", file=sys.stderr, flush=True)  # run_child reads the mapped libraries here
        first, total = [], []
        for _ in range(a.reps):
            first.append(run(1))
            total.append(run(a.tokens))
    ttft, decode_total = median(first), median(total)
    decode = decode_total - ttft
    steps = a.tokens - 1
    if decode <= 0:  # noise: run(1) took longer than run(N); more --reps or --tokens
        print(f"decode time {decode * 1e3:.3f} ms <= 0: no decode rate (noise; raise --reps or --tokens)",
              file=sys.stderr, flush=True)
        steps = 0
    cache_read = 2.0 * a.layers * lm.KV * lm.HS * lm.k[0].element_size() * a.B * (a.prompt + steps / 2)
    config = dict(re.findall(r"^[\s-]*(CPU capability usage|ATen parallel backend): (.+)$",
                             torch.__config__.show() + "\n" + torch.__config__.parallel_info(), re.M))
    print(json.dumps({
        "framework": "pytorch", "torch": torch.__version__,
        "config": {"arch": a.arch, "n_layer": a.layers, "n_embd": a.embd, "n_head": a.heads, "kv_heads": lm.KV,
                   "vocab_size": a.vocab},
        "precision": a.precision, "scheme": "dynamic_int8" if a.dynamic_int8 else "none",
        "threads": torch.get_num_threads(), "B": a.B, "prompt_tokens": a.prompt,
        "new_tokens": a.tokens, "gqa": a.gqa if lm.KV != a.heads else None,
        "ttft_ms": ttft * 1e3, "decode_tokens_per_s": a.B * steps / decode if steps else None,
        "decode_step_ms": decode / steps * 1e3 if steps else None,
        "decode_gb_per_s": (weight_bytes + cache_read) * steps / decode / 1e9 if steps else None,
        "weight_bytes": weight_bytes, "cache_bytes": lm.cache_bytes, "total_ms": decode_total * 1e3,
        "first_ms": [t * 1e3 for t in first], "total_runs_ms": [t * 1e3 for t in total],
        "cpu_capability": config.get("CPU capability usage"), "parallel_backend": config.get("ATen parallel backend"),
    }))
    return 0


def check(lm, prompts, generate, a):
    """The cached path against forwards over the whole sequence: prefill + k decode steps must
    give the logits a (B, P + k) prefill gives for its last token."""
    torch = lm.torch
    toks = generate(min(a.tokens, 4))
    seq = torch.cat([prompts, toks[:, :-1]], 1)
    worst = 0.0
    for k in range(toks.shape[1]):
        cached = lm.step(prompts, 0)
        for i in range(k):
            cached = lm.step(seq[:, a.prompt + i:a.prompt + i + 1], a.prompt + i)
        full = lm.step(seq[:, :a.prompt + k], 0)
        worst = max(worst, (cached.float() - full.float()).abs().max().item())
    print(f"check: cached vs whole-sequence logits, max |diff| {worst:.3g}", file=sys.stderr, flush=True)
    tol = 1e-3 if a.precision == "fp32" else 0.1
    if worst > tol:
        sys.exit(f"check failed: max |diff| {worst} > {tol}")


# ---------------------------------------------------------------------------------------
# the comparison


def lscpu_model_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), None)
    except (OSError, subprocess.CalledProcessError):
        return None


def run_trident(cmd, env):
    """decode_bench's run: its stdout is one multi-line JSON document (tsc.run_child reads a
    last line); stderr echoed. Adds the peak RSS (MiB, from wait4)."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}")
    result = json.loads(out[out.index("{"):])
    result["peak_rss_mib"] = usage.ru_maxrss / 1024.0
    return result


def torch_cmd(args, c, B, prompt, tokens, reps, precision, dynamic_int8=False):
    return [args.python, os.path.abspath(__file__), "--worker"] + shape_flags(c) + \
        run_flags(B, prompt, tokens, reps, args.threads, precision) + ["--gqa", args.torch_gqa] + \
        (["--dynamic-int8"] if dynamic_int8 else [])


def trident_cmd(args, c, B, precision, scheme="none"):
    return [args.trident_bench] + shape_flags(c) + \
        run_flags(B, args.prompt, args.tokens, args.reps, args.threads, precision) + \
        (["--scheme", scheme] if scheme != "none" else [])


def probe(args, name, c, precision, cand, B):
    """train_speed_compare.py's duel_probe over short decode worker runs, each judged by its
    run(N) time (see the docstring)."""
    trials = []
    cmd = torch_cmd(args, c, B, args.prompt, args.probe_tokens, 1, precision)

    def run(s, against):
        r, err = tsc.run_child(cmd, tsc.torch_env(s, cand, args.threads), allow_fail=True)
        entry = {"settings": tsc.settings_str(s), "against": against}
        if r is None:
            entry.update(failed=True, exit_status=err["exit_status"], stderr_tail=err["stderr"].strip().splitlines()[-3:])
        else:
            entry.update(total_ms=r["total_ms"], ttft_ms=r["ttft_ms"], cpu_capability=r["cpu_capability"],
                         allocator_mapped=r["allocator"], blas=r["blas"])
        trials.append(entry)
        return r

    best, _, seconds = tsc.duel_probe(f"{name}/{precision}", cand, run, lambda r: r["total_ms"], args.probe_margin)
    print(f"probe {name}/{precision} ({seconds:.0f} s, B={B}, {args.probe_tokens} tokens, margin "
          f"{100 * args.probe_margin:g}%): " + "; ".join(
              f"{t['settings']} " + (f"failed ({t['exit_status']})" if t.get("failed") else f"{t['total_ms']:.0f} ms")
              for t in trials) + f" -> {tsc.settings_str(best)}", file=sys.stderr, flush=True)
    return best, {"config": name, "precision": precision, "best": tsc.settings_str(best), "seconds": seconds,
                  "B": B, "new_tokens": args.probe_tokens, "prompt_tokens": args.prompt,
                  "margin": args.probe_margin, "trials": trials}


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def side(r, keys):
    return {k: r.get(k) for k in keys}


COMMON_KEYS = ("ttft_ms", "decode_tokens_per_s", "decode_step_ms", "decode_gb_per_s", "weight_bytes", "cache_bytes",
               "threads", "peak_rss_mib")
TRIDENT_KEYS = COMMON_KEYS + ("memory_read_gb_per_s", "bandwidth_fraction")
TORCH_KEYS = COMMON_KEYS + ("total_ms", "first_ms", "total_runs_ms", "gqa", "allocator", "blas", "cpu_capability",
                             "parallel_backend")


def rate(r):
    """Decode tokens/s, or None for a side whose run(N) was not slower than its run(1) (noise)."""
    return r["decode_tokens_per_s"] if (r["decode_tokens_per_s"] or 0) > 0 else None


def compare(t, p):
    """One row: both sides and the ratios."""
    tr, pr = rate(t), rate(p)
    return {"trident": side(t, TRIDENT_KEYS), "pytorch": side(p, TORCH_KEYS), "ttft_speedup": p["ttft_ms"] / t["ttft_ms"],
            "decode_tokens_per_s_ratio": tr / pr if tr and pr else None,
            "trident_decode_gb_per_s": t["decode_gb_per_s"] if tr else None,
            "trident_bandwidth_fraction": t.get("bandwidth_fraction") if tr else None}


def median(values):
    """The median of the values that are not None (the upper one of an even count), or None."""
    v = sorted(x for x in values if x is not None)
    return v[len(v) // 2] if v else None


def in_turns(run_a, run_b, rounds):
    """Runs a and b `rounds` times each, in turns (a b, b a, a b, ...): this machine's speed drifts
    by up to 2x over minutes, so a ratio is only fair between runs close in time, and reversing the
    order each round cancels a steady drift. Returns both lists of results, round by round."""
    ra, rb = [], []
    for i in range(rounds):
        if i % 2 == 0:
            ra.append(run_a())
            rb.append(run_b())
        else:
            rb.append(run_b())
            ra.append(run_a())
    return ra, rb


ROUND_KEYS = ("ttft_ms", "decode_tokens_per_s", "decode_step_ms", "decode_gb_per_s", "bandwidth_fraction")


def median_side(results):
    """One side's result over its rounds: the first round's fields, its timings the rounds' medians."""
    out = dict(results[0])
    for k in ROUND_KEYS:
        if k in out:
            out[k] = median(r.get(k) for r in results)
    return out


def compare_rounds(ts, ps):
    """compare() over rounds run in turns: each side's timings are the rounds' medians, and each
    ratio the median of the rounds' own ratios (each taken between runs next to each other)."""
    row = compare(median_side(ts), median_side(ps))
    rounds = [compare(t, p) for t, p in zip(ts, ps)]
    row["ttft_speedup"] = median(r["ttft_speedup"] for r in rounds)
    row["decode_tokens_per_s_ratio"] = median(r["decode_tokens_per_s_ratio"] for r in rounds)
    row["rounds"] = [{"trident_ttft_ms": t["ttft_ms"], "pytorch_ttft_ms": p["ttft_ms"],
                      "trident_decode_tokens_per_s": rate(t), "pytorch_decode_tokens_per_s": rate(p),
                      "ttft_speedup": r["ttft_speedup"], "decode_tokens_per_s_ratio": r["decode_tokens_per_s_ratio"]}
                     for t, p, r in zip(ts, ps, rounds)]
    return row


def main():
    if "--worker" in sys.argv[1:]:
        return torch_worker(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident-bench", default=os.path.join(REPO, "build-dev", "bench", "decode_bench"))
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch (Debian's python3-torch)")
    ap.add_argument("--configs", default="gpt2-124M,llama125M", help=", ".join(CONFIGS))
    ap.add_argument("--precisions", default="fp32", help="fp32 and/or bf16")
    ap.add_argument("--batch", default="1,8", help="batch sizes B")
    ap.add_argument("--prompt", type=int, default=128, help="prompt tokens P per request")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens N per request (>= 2)")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per process (median)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="processes per side and row, run in turns with the peer's (a b, b a, ...); each ratio "
                         "is the median of the rounds' ratios")
    ap.add_argument("--threads", type=int, default=2, help="both frameworks' thread count")
    ap.add_argument("--torch-settings", default=None,
                    help="fix PyTorch's settings, skip the probe: e.g. allocator=tcmalloc,wait=PASSIVE,isa=avx512")
    ap.add_argument("--torch-gqa", default="group", choices=["group", "repeat"],
                    help="PyTorch's grouped-query attention: group (no copy) or repeat_interleave of the cache")
    ap.add_argument("--probe-batch", type=int, default=0,
                    help="B of the probe's runs; 0 (the default): probe at each --batch value, whose best "
                         "settings can differ (GPT-2's prefill at B=8 did)")
    ap.add_argument("--probe-tokens", type=int, default=8, help="new tokens of the probe's runs")
    ap.add_argument("--probe-margin", type=float, default=0.03,
                    help="a probed setting replaces the best so far only if this much faster (0.03: 3%%)")
    ap.add_argument("--schemes", default="none",
                    help="trident's weights: none (fp32) and decode_bench --scheme values (int8, int4, nf4; fp32 only)")
    ap.add_argument("--torch-int8", default="dynamic", choices=["dynamic", "none"],
                    help="PyTorch's peer of trident's int8: quantize_dynamic's int8 Linear, or its fp32")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()
    schemes = args.schemes.split(",")
    if "none" not in schemes:  # decode_bench names the schemes it has
        sys.exit(f"--schemes: none (the fp32 baseline) and any of decode_bench's --scheme values, got {args.schemes}")
    if schemes != ["none"] and args.precisions != "fp32":
        sys.exit("--schemes int8/int4 compare fp32 runs: use --precisions fp32")
    names = args.configs.split(",")
    for n in names:
        if n not in CONFIGS:
            sys.exit(f"--configs: unknown {n!r} (have {', '.join(CONFIGS)})")
    precisions = args.precisions.split(",")
    if not set(precisions) <= {"fp32", "bf16"}:
        sys.exit(f"--precisions: fp32 and/or bf16, got {args.precisions}")
    batches = [int(b) for b in args.batch.split(",")]
    if min(batches) < 1 or args.tokens < 2 or args.prompt < 1 or args.reps < 1 or args.probe_tokens < 2 or args.rounds < 1:
        sys.exit("--batch >= 1, --tokens >= 2, --probe-tokens >= 2, --prompt >= 1, --reps >= 1, --rounds >= 1")
    if not os.access(args.trident_bench, os.X_OK):
        sys.exit(f"--trident-bench: {args.trident_bench} is not an executable")
    if not 0.0 <= args.probe_margin < 1.0:
        sys.exit(f"--probe-margin: expected a fraction in [0, 1), got {args.probe_margin}")

    cpu = tsc.cpu_info()
    cpu["model_name"] = lscpu_model_name() or cpu["model_name"]
    cand = tsc.torch_candidates(cpu)
    fixed = tsc.parse_settings(args.torch_settings, cand) if args.torch_settings is not None else None
    tri_env = dict(tsc.base_env(args.threads), OMP_WAIT_POLICY="PASSIVE")
    report = {"benchmark": "decode_compare",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cpu": cpu, "threads": args.threads, "prompt_tokens": args.prompt, "new_tokens": args.tokens,
              "reps": args.reps, "rounds": args.rounds, "batch": batches, "precisions": precisions, "schemes": schemes,
              "trident_bench": args.trident_bench,
              "trident_settings": {"allocator": "trident caching allocator over glibc malloc (nothing preloaded)",
                                   "wait": "PASSIVE"},
              "pytorch_candidates": {k: dict(v) for k, v in cand.items()},
              "pytorch_settings_fixed": tsc.settings_str(fixed) if fixed else None,
              "pytorch_gqa": args.torch_gqa, "probe_margin": None if fixed else args.probe_margin,
              "stripped_env": tsc.stripped_env(), "probes": [], "configs": {}}
    for name in names:
        c = CONFIGS[name]
        entry = {"shape": dict(c, arch=c.get("arch", "gpt2"), V=c.get("V", tsc.V))}
        for prec in precisions:
            e = entry[prec] = {"by_batch": {}}
            setting = fixed
            for B in batches:
                if not fixed and (args.probe_batch == 0 or B == batches[0]):
                    setting, record = probe(args, name, c, prec, cand, args.probe_batch or B)
                    report["probes"].append(record)
                torch_env = tsc.torch_env(setting, cand, args.threads)
                e["pytorch_settings"] = tsc.settings_str(setting)
                ts, ps = in_turns(lambda: run_trident(trident_cmd(args, c, B, prec), tri_env),
                                  lambda: tsc.run_child(torch_cmd(args, c, B, args.prompt, args.tokens, args.reps,
                                                                  prec), torch_env)[0], args.rounds)
                t, p = median_side(ts), median_side(ps)
                e["torch"] = p["torch"]
                row = e["by_batch"][str(B)] = compare_rounds(ts, ps)
                row["pytorch_settings"] = e["pytorch_settings"]
                row["issue49_2x"] = {"ttft": row["ttft_speedup"] >= 2.0,
                                     "decode_tokens_per_s": row["decode_tokens_per_s_ratio"] >= 2.0
                                     if row["decode_tokens_per_s_ratio"] else None,
                                     "bandwidth_70pct": row["trident_bandwidth_fraction"] >= 0.7
                                     if B == 1 and row["trident_bandwidth_fraction"] else None}
                print(f"{name} {prec} B={B}: TTFT trident {t['ttft_ms']:.1f} ms, PyTorch {p['ttft_ms']:.1f} ms "
                      f"({row['ttft_speedup']:.2f}x); decode trident {fmt(rate(t), '.1f')} tok/s "
                      f"({fmt(row['trident_decode_gb_per_s'], '.2f')} GB/s = "
                      f"{fmt(row['trident_bandwidth_fraction'], '.0%')} of {t.get('memory_read_gb_per_s', 0):.1f}), "
                      f"PyTorch [{e['pytorch_settings']}] "
                      f"{fmt(rate(p), '.1f')} tok/s (ratio {fmt(row['decode_tokens_per_s_ratio'], '.2f')})",
                      file=sys.stderr, flush=True)
                dynamic_ok = True
                for scheme in [x for x in schemes if x != "none"]:
                    run_tq = lambda: run_trident(trident_cmd(args, c, B, prec, scheme), tri_env)  # noqa: E731
                    if scheme in ("int8", "w8a8") and args.torch_int8 == "dynamic" and dynamic_ok:
                        def run_pq():
                            r, err = tsc.run_child(torch_cmd(args, c, B, args.prompt, args.tokens, args.reps, prec,
                                                             True), torch_env, allow_fail=True)
                            if r is None:
                                print(f"PyTorch's dynamic int8 failed ({err['exit_status']})", file=sys.stderr,
                                      flush=True)
                            return r
                        tqs, pqs = in_turns(run_tq, run_pq, args.rounds)
                        if any(r is None for r in pqs):
                            print("PyTorch's dynamic int8 failed: compared with its fp32", file=sys.stderr, flush=True)
                            dynamic_ok, pqs = False, ps
                    else:  # PyTorch's fp32 rounds (run beside trident's fp32, not these)
                        tqs, pqs = [run_tq() for _ in range(args.rounds)], ps
                    tq, pq = median_side(tqs), median_side(pqs)
                    q = compare_rounds(tqs, pqs)
                    q["pytorch_scheme"] = pq.get("scheme", "none")
                    q["vs_trident_fp32"] = rate(tq) / rate(t) if rate(tq) and rate(t) else None
                    if scheme == "int8" and B == 1:
                        q["issue49_int8_1_7x"] = q["vs_trident_fp32"] >= 1.7 if q["vs_trident_fp32"] else None
                    e.setdefault("schemes", {}).setdefault(scheme, {})[str(B)] = q
                    print(f"{name} {scheme} B={B}: decode trident {fmt(rate(tq), '.1f')} tok/s "
                          f"({fmt(q['vs_trident_fp32'], '.2f')}x trident fp32; {fmt(q['trident_decode_gb_per_s'], '.2f')} "
                          f"GB/s), PyTorch {q['pytorch_scheme']} {fmt(rate(pq), '.1f')} tok/s (ratio "
                          f"{fmt(q['decode_tokens_per_s_ratio'], '.2f')}); TTFT {tq['ttft_ms']:.1f} ms",
                          file=sys.stderr, flush=True)
        report["configs"][name] = entry
    print(f"CPU: {cpu['model_name']} (family {cpu['family']} model {cpu['model']}; {' '.join(cpu['flags'])}); "
          f"{args.threads} threads", file=sys.stderr, flush=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
