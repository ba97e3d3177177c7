#!/usr/bin/env python3
"""GPT-2 and LLaMA training speed and memory, trident vs PyTorch at PyTorch's best settings (issues #20, #22).

For each config and precision, alternating trident and PyTorch `--reps` times (so a noisy
neighbour hits both), each run in its own process: `--warmup` untimed steps, then `--steps`
timed steps of forward + backward + clip_grad_norm_ + AdamW + zero_grad on random tokens, same
thread count, model, batch and optimizer. fp32 is compared with fp32; trident's bf16 (bf16
model, fp32 master weights) with PyTorch's bf16 autocast (torch.autocast("cpu", bfloat16)
around forward + loss, fp32 weights and AdamW, as PyTorch's CPU docs recommend), and also with
PyTorch's fp32. Reported per framework: the median over runs of each run's median step
(ms/step, tokens/s), peak RSS (the process's, from wait4), the libraries it mapped (BLAS,
allocator), the ratios trident/PyTorch, and MFU: 6 x N + 12 x L x C x T FLOPs per token
(PaLM's count; N every parameter but the embedding tables a token only gathers: an untied
input embedding and GPT-2's position embedding, Note [MFU's N] in src/train/mfu.h; trident's
"flops_per_token") against the fastest GEMM rate of that dtype
that trident's `--gemm-rates` measures over the model's GEMM shapes (`gemm_ceiling_gflops`; a
binary without the flag: its square `--sgemm` rates). Both sides get the same ceiling. The
rates are measured once per config and precision in a trident process of their own (one
untimed step, then the rates), whose peak RSS and times are never used: the rates' buffers
would overstate trident's peak for the training step, and every timed trident run is a plain
one.

PyTorch's settings. Candidates found on this machine: the allocator (glibc; tcmalloc and
jemalloc by LD_PRELOAD of libtcmalloc_minimal.so.4 / libjemalloc.so.2 where installed: Debian's
libtcmalloc-minimal4 and libjemalloc2), OMP_WAIT_POLICY (PASSIVE, ACTIVE), ATen's kernel ISA
(the build's default, and ATEN_CPU_CAPABILITY=avx512 on AVX-512 CPUs: Debian's torch 1.13
defaults to AVX2 there), and the OpenBLAS build (each installed openblas-{openmp,pthread,serial}
directory, chosen per process by LD_LIBRARY_PATH; the default is what update-alternatives gives
libblas.so.3), and OpenBLAS's kernels (its own choice, and OPENBLAS_CORETYPE=SkylakeX on AVX-512
CPUs: Debian's OpenBLAS 0.3.21 runs its AVX2 kernels on Zen 4 and Zen 5, Note [OpenBLAS's
kernels on new CPUs]). Threads are fixed: `--threads` for both frameworks. The probe walks the axes in
that order from glibc/PASSIVE/default ISA/default BLAS, one axis at a time: every other value
of the axis is run with the best values so far of the others, in a duel with the best so far
(duel_probe: best, challenger, challenger, best, in turns, each side judged by the faster of its
two runs; this machine's speed drifts by up to 2x over minutes, and single runs once chose glibc
over tcmalloc by drift), and replaces it only if at least `--probe-margin` (3%) faster (so a
setting that wins by less stays at the default or the earlier value). 1 + 4 per challenger runs:
(allocators - 1) + 1 + (1 where avx512 is not already the default) + (OpenBLAS builds - 1) + (1
on AVX-512 CPUs) challengers, 5 with glibc/tcmalloc/jemalloc and one OpenBLAS on an AVX-512 CPU.
Each probe run is one process, 1 untimed + `--probe-steps` timed steps, judged by its median
step. A candidate whose run fails (a preload or ATEN_CPU_CAPABILITY=avx512 that this torch build
cannot run) is recorded with its exit status and skipped; only the defaults failing ends the
benchmark. The probe runs per precision on the config itself up to `small`, and by default on
`small` for larger configs (PyTorch's 124M fp32 step takes ~90 s under glibc); `--probe-on self`
probes every config on itself, since what wins on `small` need not win on 124M
(OMP_WAIT_POLICY=ACTIVE was within the margin on `small` and 1.5x faster on 124M, 2026-11-30).
Once per (probe config, precision): every probed setting is printed with its time, and the
probe's wall time. `--torch-settings allocator=tcmalloc,wait=ACTIVE` fixes
the settings for both precisions (axes left out take the defaults) and skips the probe.
trident runs with glibc's malloc under its own caching allocator (nothing preloaded) and
OMP_WAIT_POLICY=PASSIVE.

CPU time. Beside its wall time every run reports the CPU milliseconds of each step (all its
threads': getrusage in train_step_bench, time.process_time() in the PyTorch worker), summarized
as "cpu_ms_per_step", and the LoRA ratios are also given by CPU time ("cpu_speedup"). On a
machine shared with other jobs a step's wall time grows with whatever else runs, its CPU time
much less: the wall ratio is the one the targets speak of, the CPU ratio says whether it is
noise. CPU time measures work only where idle threads sleep (OMP_WAIT_POLICY=PASSIVE, trident's
setting); a PyTorch run probed to ACTIVE also counts its spinning.

The environment. Both sides start from the caller's environment less the variables that would
change either side's kernels, threads or allocator behind the benchmark's back (STRIPPED_ENV:
TRIDENT_CPU_*, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, OMP_PROC_BIND, OMP_PLACES,
GOMP_CPU_AFFINITY, LD_PRELOAD, ...); each side then gets explicitly what it needs
(OMP_NUM_THREADS=--threads and OMP_WAIT_POLICY for both; PyTorch's probed LD_PRELOAD,
ATEN_CPU_CAPABILITY and LD_LIBRARY_PATH). What was stripped, with the caller's values, is in
the JSON as "stripped_env".

  configs  tiny   L=4  C=256 NH=4  T=256  B=8
           small  L=6  C=512 NH=8  T=512  B=4
           124M   L=12 C=768 NH=12 T=1024 B=4     (GPT-2, V=50257)
  llama125M       L=12 C=768 NH=12 (4 kv heads) SwiGLU 2048 T=1024 B=4 V=32000 (untied head)

LoRA (issue #48; `--lora r=8,alpha=16,targets=q_proj,k_proj,v_proj,o_proj`, off by default).
Each rep then runs, in this order, trident LoRA, trident full fine-tuning (the run without --lora),
PyTorch LoRA and PyTorch full fine-tuning (left out with `--no-pytorch-full`), same steps,
batch, threads and AdamW; PyTorch's runs take the probe's settings (the probe runs full
fine-tuning, as without --lora). trident: train_step_bench --lora-r R --lora-alpha A
--lora-targets T (adapters/lora.h: the base frozen, in the compute dtype; only the adapters
reach the masters, AdamW and the clipping). PyTorch: the same model, every base parameter
requires_grad_(False), and each targeted nn.Linear (GPT-2's Conv1D) wrapped by
tests/parity/peft_lora.py as PEFT computes it, base(x) + (alpha / r) * B(A(x)), A (r, in)
kaiming-uniform (a = sqrt(5)), B (out, r) zero, no dropout; AdamW and clip_grad_norm_ over the
adapters alone. Targets are PEFT names (a layer whose path is the name or ends with "." + it);
left out, or naming a layer the config's family lacks (LLaMA's q_proj on GPT-2), they are the
family's attention projections: LLaMA q_proj,k_proj,v_proj,o_proj, GPT-2 c_attn,attn.c_proj
(the config's "lora" says which ran and why). Reported per side ("trident_lora", "trident",
"pytorch_lora", "pytorch"): ms/step, tokens/s, peak RSS, "params" and "trainable_params" (and
"lora_layers"); a LoRA side's MFU counts 4 FLOPs per frozen weight and token, not 6 (trident's
"flops_per_token", Note [MFU of a partly frozen model] in src/train/mfu.h). Ratios:
"trident_lora_vs_full" (speedup = full's ms/step / LoRA's, peak_rss_fraction = LoRA's / full's,
trainable_params_fraction), "trident_lora_vs_pytorch_lora" (speedup = PyTorch's ms/step /
trident's, peak_rss_ratio = trident's / PyTorch's), "pytorch_lora_vs_full", and
"lora_targets_met": issue #48's targets, LoRA's peak RSS <= 1/3 of full's, LoRA >= 1.3x faster
than full, trident LoRA >= 1.5x PyTorch LoRA.

PyTorch's models are tests/parity/gpt2_torch.py's nanoGPT-style GPT-2 and llama_torch.py's
LLaMA (Hugging Face's math; Debian's torch 1.13, which must be imported by /usr/bin/python3:
unfused attention, no scaled_dot_product_attention).

    bench/train_speed_compare.py --trident-bench build/bench/train_step_bench \\
        [--configs tiny,small,124M] [--precisions fp32,bf16] [--torch-settings allocator=tcmalloc]
        [--lora r=8,alpha=16,targets=q_proj,k_proj,v_proj,o_proj [--no-pytorch-full]]
"""

import argparse
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {
    "tiny": dict(L=4, C=256, NH=4, T=256, B=8),
    "small": dict(L=6, C=512, NH=8, T=512, B=4),
    "124M": dict(L=12, C=768, NH=12, T=1024, B=4),
    "llama125M": dict(arch="llama", L=12, C=768, NH=12, KV=4, I=2048, T=1024, B=4, V=32000),
    # bench/moe_compare.py's pair (issue #51): 8 experts, top-2, each expert half the dense MLP's
    # width, so a token's active parameters are the dense model's and the MLPs hold 4x as many.
    "llama_dense": dict(arch="llama", L=4, C=384, NH=6, KV=2, I=1024, T=256, B=8, V=8192),
    "moe8x2": dict(arch="llama", L=4, C=384, NH=6, KV=2, I=1024, T=256, B=8, V=8192, E=8, K=2, EI=512),
}
PROBE_ON = {"tiny": "tiny", "small": "small", "124M": "small", "llama125M": "small", "llama_dense": "llama_dense",
            "moe8x2": "moe8x2"}
V = 50257  # GPT-2's; a config's own "V" wins


def vocab(c):
    return c.get("V", V)
LIBDIR = os.path.join("/usr/lib", sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu")
ALLOCATOR_LIBS = {"tcmalloc": "libtcmalloc_minimal.so.4", "jemalloc": "libjemalloc.so.2"}
DEFAULTS = {"allocator": "glibc", "wait": "PASSIVE", "isa": "default", "blas_core": "default"}  # blas: the system's
MAPPED = re.compile(r"lib(open)?blas|liblapack|tcmalloc|jemalloc|libgomp|libomp|libdnnl")
# The caller's variables that neither side inherits (see the docstring); TRIDENT_CPU_* by prefix.
STRIPPED_ENV = ("LD_PRELOAD", "ATEN_CPU_CAPABILITY", "OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "GOTO_NUM_THREADS", "MKL_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY",
                "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE")
STRIPPED_PREFIXES = ("TRIDENT_CPU_",)
# --lora: each family's linear layers (the last part of a PEFT target name) and its targets when
# the spec names none or names layers the family does not have: attention's projections.
LORA_LINEARS = {"llama": {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
                "gpt2": {"c_attn", "c_proj", "c_fc"}}
LORA_DEFAULT_TARGETS = {"llama": "q_proj,k_proj,v_proj,o_proj", "gpt2": "c_attn,attn.c_proj"}


def parse_lora(text):
    """--lora "r=8,alpha=16,targets=q_proj,k_proj" -> {"r", "alpha", "targets" (None: the family's
    default)}; items after targets= without '=' are more targets."""
    spec, key = {"r": 8, "alpha": 16.0, "targets": None}, None
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        k, eq, v = item.partition("=")
        if eq and k in spec:
            key = k
            spec[k] = int(v) if k == "r" else float(v) if k == "alpha" else v
        elif not eq and key == "targets":
            spec["targets"] += "," + item
        else:
            sys.exit(f"--lora: {item!r}: expected r=R,alpha=A,targets=name,name,...")
    if spec["r"] <= 0:
        sys.exit(f"--lora: r must be positive, got {spec['r']}")
    for t in (spec["targets"] or "").split(","):
        if "*" in t or "?" in t or t == "all-linear":
            sys.exit(f"--lora: target {t!r}: names only (PEFT's list rule; both sides must match it)")
    return spec


def lora_targets(spec, c):
    """The targets a config's family runs: the spec's, or the family's default when it names none
    or a layer the family lacks (LLaMA's q_proj on GPT-2). Returns (targets, note or None)."""
    arch = c.get("arch", "gpt2")
    if not spec["targets"]:
        return LORA_DEFAULT_TARGETS[arch], None
    missing = [t for t in spec["targets"].split(",") if t.rsplit(".", 1)[-1] not in LORA_LINEARS[arch]]
    if missing:
        return LORA_DEFAULT_TARGETS[arch], f"{arch} has no {','.join(missing)}: its default targets instead"
    return spec["targets"], None


def cpu_info():
    """The CPU's name, family/model numbers and the SIMD flags that matter for GEMMs."""
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields.setdefault(k.strip(), v.strip())
    flags = fields.get("flags", "").split()
    return {"model_name": fields.get("model name"), "family": fields.get("cpu family"), "model": fields.get("model"),
            "cores": os.cpu_count(),
            "flags": [f for f in flags if f in ("avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16")
                      or f.startswith("amx")]}


def torch_candidates(cpu):
    """Each setting axis -> {value: what it sets} for the values available on this machine."""
    alloc = {"glibc": None}
    for name, lib in ALLOCATOR_LIBS.items():
        for d in (LIBDIR, "/lib/" + os.path.basename(LIBDIR), "/usr/lib64", "/usr/local/lib"):
            if os.path.exists(os.path.join(d, lib)):
                alloc[name] = os.path.join(d, lib)
                break
    system_blas = os.path.realpath(os.path.join(LIBDIR, "libblas.so.3"))
    blas = {os.path.basename(os.path.dirname(system_blas)): None}  # update-alternatives' choice
    for path in sorted(glob.glob(os.path.join(LIBDIR, "openblas-*", "libblas.so.3"))):
        blas.setdefault(os.path.basename(os.path.dirname(path)), os.path.dirname(path))
    isa = {"default": None}
    # Note [OpenBLAS's kernels on new CPUs]: OpenBLAS 0.3.21 (Debian 12) does not know Zen 4 or
    # Zen 5 and runs its AVX2 (Haswell) kernels there; OPENBLAS_CORETYPE=SkylakeX selects its
    # AVX-512 ones. Measured on a Zen 5 (2 threads): PyTorch's GPT-2 124M prefill of 8 x 128
    # tokens took 1196-1267 ms with the default and 765-824 ms with SkylakeX.
    blas_core = {"default": None}
    if "avx512f" in cpu["flags"]:
        isa["avx512"] = "avx512"
        if {"avx512bw", "avx512dq", "avx512vl"} <= set(cpu["flags"]):
            blas_core["SkylakeX"] = "SkylakeX"
    return {"allocator": alloc, "wait": {"PASSIVE": "PASSIVE", "ACTIVE": "ACTIVE"}, "isa": isa, "blas": blas,
            "blas_core": blas_core}


def settings_str(s):
    return ",".join(f"{k}={v}" for k, v in s.items())


def parse_settings(text, cand):
    s = dict(DEFAULTS, blas=next(iter(cand["blas"])))
    for item in filter(None, text.split(",")):
        k, _, v = item.partition("=")
        if k not in cand or v not in cand[k]:
            sys.exit(f"--torch-settings: {item!r}: available {settings_str({a: '|'.join(c) for a, c in cand.items()})}")
        s[k] = v
    return s


def stripped_env():
    """The caller's variables that base_env() drops: {name: the caller's value}."""
    return {k: v for k, v in sorted(os.environ.items()) if k in STRIPPED_ENV or k.startswith(STRIPPED_PREFIXES)}


def base_env(threads):
    """The caller's environment less stripped_env(), with the thread count both sides run."""
    stripped = stripped_env()
    env = {k: v for k, v in os.environ.items() if k not in stripped}
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def torch_env(setting, cand, threads):
    env = dict(base_env(threads), OMP_WAIT_POLICY=setting["wait"])
    if cand["allocator"][setting["allocator"]]:
        env["LD_PRELOAD"] = cand["allocator"][setting["allocator"]]
    if cand["isa"][setting["isa"]]:
        env["ATEN_CPU_CAPABILITY"] = cand["isa"][setting["isa"]]
    if cand["blas_core"][setting["blas_core"]]:
        env["OPENBLAS_CORETYPE"] = cand["blas_core"][setting["blas_core"]]
    if cand["blas"][setting["blas"]]:
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [cand["blas"][setting["blas"]], env.get("LD_LIBRARY_PATH")]))
    return env


def torch_worker(args):
    """One PyTorch run, in this process; prints one JSON line."""
    import torch
    sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
    from gpt2_torch import GPT2
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    c = CONFIGS[args.config]
    V = vocab(c)
    if c.get("arch") == "llama":
        from llama_torch import Llama
        model = Llama(argparse.Namespace(n_layer=c["L"], n_head=c["NH"], n_kv_heads=c["KV"], n_embd=c["C"],
                                         intermediate_size=c["I"], block_size=c["T"], vocab_size=V, rope_theta=10000.0,
                                         rms_norm_eps=1e-6, tie_word_embeddings=False, qkv_bias=False,
                                         rope_scaling_factor=0.0, rope_low_freq_factor=1.0,
                                         rope_high_freq_factor=4.0, rope_original_max_position=8192,
                                         sliding_window=0,
                                         # a mixture of experts as transformers writes it (a loop over
                                         # the experts), with trident's default load-balancing loss
                                         num_experts=c.get("E", 0), top_k=c.get("K", 2),
                                         moe_intermediate_size=c.get("EI", 0), shared_expert_intermediate_size=0,
                                         norm_topk_prob=True, decoder_sparse_step=1, router_aux_loss_coef=0.001,
                                         router_z_loss_coef=0.0))
    else:
        model = GPT2(c["L"], c["NH"], c["C"], c["T"], V)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif ("ln_" in name or "norm" in name) and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
    lora = None
    if args.lora_r > 0:
        # PEFT's LoRA (tests/parity/peft_lora.py): the base frozen, each target wrapped as
        # base(x) + lora_B(lora_A(x)) * alpha / r; A kaiming-uniform (a = sqrt(5)), B zero.
        import peft_lora
        targets = [t for t in args.lora_targets.split(",") if t]
        wrapped = peft_lora.apply(model, model.HF_PREFIX, targets, args.lora_r, args.lora_alpha, False)
        with torch.no_grad():
            for layer in wrapped.values():
                torch.nn.init.kaiming_uniform_(layer.lora_A.weight, a=math.sqrt(5))
                layer.lora_B.weight.zero_()
        lora = {"r": args.lora_r, "alpha": args.lora_alpha, "scaling": args.lora_alpha / args.lora_r,
                "target_modules": args.lora_targets, "layers": list(wrapped)}
    model.train()
    n_params = sum(p.numel() for p in model.parameters())  # with the adapters, as trident counts
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    step_ms, step_cpu_ms, losses = [], [], []
    for s in range(args.warmup + args.steps):
        idx = torch.randint(0, V, (c["B"], c["T"]), generator=g)
        targets = torch.randint(0, V, (c["B"], c["T"]), generator=g)
        t0, cpu0 = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        step_cpu_ms.append((time.process_time() - cpu0) * 1e3)  # every thread's, as trident's step_cpu_ms
        losses.append(loss.item())
        print(f"step {s + 1}: {step_ms[-1]:.0f} ms, loss {losses[-1]:.4f}", file=sys.stderr, flush=True)
    ms = statistics.median(step_ms[args.warmup:])
    config = dict(re.findall(r"^[\s-]*(CPU capability usage|ATen parallel backend): (.+)$",
                             torch.__config__.show() + "\n" + torch.__config__.parallel_info(), re.M))
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "params": n_params,
                      "trainable_params": sum(p.numel() for p in params), "lora": lora,
                      "threads": torch.get_num_threads(), "cpu_capability": config.get("CPU capability usage"),
                      "parallel_backend": config.get("ATen parallel backend"),
                      "step_ms": step_ms, "losses": losses, "median_step_ms": ms, "step_cpu_ms": step_cpu_ms,
                      "median_step_cpu_ms": statistics.median(step_cpu_ms[args.warmup:]),
                      "tokens_per_s": c["B"] * c["T"] / (ms / 1e3)}))


def run_child(cmd, env, allow_fail=False):
    """Runs cmd, echoing its stderr; returns its last stdout line as JSON plus its peak RSS (MiB,
    from wait4) and the libraries it mapped (from /proc/<pid>/maps at its first step), or None
    when allow_fail and it failed: the second value is then {"exit_status", "stderr"} (a
    negative status: killed by that signal)."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE, text=True)
        err, libs = [], None
        for line in p.stderr:
            sys.stderr.write(line)
            err.append(line)
            if libs is None and line.startswith("step "):
                try:
                    with open(f"/proc/{p.pid}/maps") as maps:
                        libs = sorted({os.path.realpath(l.split()[-1]) for l in maps if MAPPED.search(l)})
                except OSError:
                    libs = []
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            if allow_fail:
                return None, {"exit_status": p.returncode, "stderr": "".join(err)}
            sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}")
        out.seek(0)
        result = json.loads(out.read().strip().splitlines()[-1])
    result["peak_rss_mib"] = usage.ru_maxrss / 1024.0
    result["libs"] = libs or []
    names = " ".join(os.path.basename(l) for l in result["libs"])
    result["allocator"] = next((a for a in ALLOCATOR_LIBS if a in names), "glibc")
    blas = [l for l in result["libs"] if "openblas" in os.path.basename(l)] or \
        [l for l in result["libs"] if "libblas" in os.path.basename(l)]
    result["blas"] = blas[0] if blas else None
    return result, None


def trident_cmd(args, c, steps, precision, extra, warmup=None):
    family = ["--arch", "llama", "--kv-heads", str(c["KV"]), "--intermediate", str(c["I"])] \
        if c.get("arch") == "llama" else []
    if c.get("E"):
        family += ["--experts", str(c["E"]), "--top-k", str(c["K"]), "--expert-intermediate", str(c["EI"])]
    return [args.trident_bench] + family + ["--layers", str(c["L"]), "--embd", str(c["C"]), "--heads", str(c["NH"]),
            "--vocab", str(vocab(c)), "--T", str(c["T"]), "--B", str(c["B"]), "--steps", str(steps),
            "--warmup", str(args.warmup if warmup is None else warmup), "--threads", str(args.threads),
            "--checkpointing", args.checkpointing, "--precision", precision] + extra


def trident_gemm_ceiling(args, c, precision, env, gemm_flag):
    """The GEMM rates in a trident process of their own (one step, then the rates): its RSS
    and times are never compared. Returns (ceiling GFLOP/s, the flag that gave it, the
    process's JSON); the flag falls back to --sgemm for a binary without --gemm-rates."""
    cmd = trident_cmd(args, c, 1, precision, [gemm_flag], warmup=0)
    r, err = run_child(cmd, env, allow_fail=gemm_flag == "--gemm-rates")
    if r is None:
        if "--gemm-rates" not in err["stderr"]:
            sys.exit(f"failed ({err['exit_status']}): {' '.join(cmd)}")
        gemm_flag = "--sgemm"  # an older train_step_bench: square GEMM rates only
        r, _ = run_child(trident_cmd(args, c, 1, precision, [gemm_flag], warmup=0), env)
    ceiling = r.get("gemm_ceiling_gflops") or r.get("sgemm_gflops" if precision == "fp32" else "bf16_gemm_gflops")
    return ceiling, gemm_flag, r


def torch_cmd(args, config, steps, warmup, precision, lora=None):
    """lora: {"r", "alpha", "targets"} (resolved for the config), or None for full fine-tuning."""
    extra = ["--lora-r", str(lora["r"]), "--lora-alpha", str(lora["alpha"]), "--lora-targets", lora["targets"]] \
        if lora else []
    return [args.python, os.path.abspath(__file__), "--torch-worker", "--config", config, "--steps", str(steps),
            "--warmup", str(warmup), "--threads", str(args.threads), "--precision", precision] + extra


def lora_flags(lora):
    """train_step_bench's flags for a resolved LoRA spec."""
    return ["--lora-r", str(lora["r"]), "--lora-alpha", str(lora["alpha"]), "--lora-targets", lora["targets"]]


def duel_probe(label, cand, run, metric, margin):
    """The coordinate search over PyTorch's settings (see the docstring), each challenger judged
    against the best so far in a duel of runs in turns: best, challenger, challenger, best (a
    steady drift of the machine's speed hits both sides alike), each side by the faster of its two
    runs, and the challenger wins only if at least `margin` faster. run(settings, against) -> a
    run's JSON, or None when it failed (the caller records both); metric(run's JSON) -> its time.
    Returns the best settings, the best's JSON and the wall seconds."""
    t0 = time.perf_counter()

    def faster(results):
        done = [r for r in results if r is not None]
        return min(done, key=metric) if done else None

    best = dict(DEFAULTS, blas=next(iter(cand["blas"])))
    best_r = run(best, None)
    if best_r is None:
        sys.exit(f"probe {label}: PyTorch failed with the default settings {settings_str(best)}")
    for axis, values in cand.items():
        for v in values:
            if v == best[axis] or (axis == "isa" and v.upper() == best_r["cpu_capability"]):
                continue
            s = dict(best, **{axis: v})
            key = settings_str(best)
            first = run(best, None)
            challenger = [run(s, key)]
            if challenger[0] is None:
                continue  # this setting cannot run here (recorded)
            challenger.append(run(s, key))
            best_r = faster([first, run(best, None)]) or best_r
            r = faster(challenger)
            if r is not None and metric(r) <= (1.0 - margin) * metric(best_r):
                best, best_r = s, r
    return best, best_r, time.perf_counter() - t0


def probe(args, config, precision, cand):
    """duel_probe over train steps of `config`; returns the winner, every trial (a failed one with
    its exit status) and the probe's wall time."""
    trials = []

    def run(s, against):
        r, err = run_child(torch_cmd(args, config, args.probe_steps, 1, precision), torch_env(s, cand, args.threads),
                           allow_fail=True)
        entry = {"settings": settings_str(s), "against": against}
        if r is None:
            entry.update(failed=True, exit_status=err["exit_status"],
                         stderr_tail=err["stderr"].strip().splitlines()[-3:])
            print(f"probe {config}/{precision}: {entry['settings']} failed (exit status {err['exit_status']}), skipped",
                  file=sys.stderr, flush=True)
        else:
            entry.update(ms_per_step=r["median_step_ms"], tokens_per_s=r["tokens_per_s"], peak_rss_mib=r["peak_rss_mib"],
                         cpu_capability=r["cpu_capability"], blas=r["blas"], allocator_mapped=r["allocator"])
        trials.append(entry)
        return r

    best, _, seconds = duel_probe(f"{config}/{precision}", cand, run, lambda r: r["median_step_ms"], args.probe_margin)
    print(f"probe {config}/{precision} ({seconds:.0f} s, margin {100 * args.probe_margin:g}%): " + "; ".join(
        f"{t['settings']} " + (f"failed ({t['exit_status']})" if t.get("failed") else f"{t['ms_per_step']:.0f} ms")
        for t in trials) + f" -> {settings_str(best)}", file=sys.stderr, flush=True)
    return best, {"config": config, "precision": precision, "best": settings_str(best), "seconds": seconds,
                  "margin": args.probe_margin, "trials": trials}


def summarize(rs, tokens, flops_per_token, ceiling):
    """One framework's runs -> medians, peak RSS, MFU and what it ran with."""
    ms = statistics.median(r["median_step_ms"] for r in rs)
    tps = tokens / (ms / 1e3)
    cpu = [r["median_step_cpu_ms"] for r in rs if "median_step_cpu_ms" in r]
    return {"ms_per_step": ms, "cpu_ms_per_step": statistics.median(cpu) if len(cpu) == len(rs) else None,
            "per_run_step_cpu_ms": cpu, "tokens_per_s": tps, "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
            "params": rs[0]["params"], "trainable_params": rs[0].get("trainable_params", rs[0]["params"]), "mfu": flops_per_token * tps / (ceiling * 1e9) if ceiling else None,
            "per_run_step_ms": [r["median_step_ms"] for r in rs], "allocator": rs[0]["allocator"],
            "blas": rs[0]["blas"], "libs": rs[0]["libs"]}


def ratios(a, b):
    return {"tokens_per_s_ratio": a["tokens_per_s"] / b["tokens_per_s"],
            "peak_rss_ratio": a["peak_rss_mib"] / b["peak_rss_mib"]}


def cpu_speedup(fast, slow):
    """slow's CPU ms per step over fast's (the docstring's "CPU time"), or None."""
    return slow["cpu_ms_per_step"] / fast["cpu_ms_per_step"] if fast["cpu_ms_per_step"] and slow["cpu_ms_per_step"] \
        else None


def lora_ratios(lora, full):
    """LoRA against full fine-tuning on one framework: speedup (full's ms/step over LoRA's) and
    LoRA's peak RSS as a fraction of full's."""
    return {"speedup": full["ms_per_step"] / lora["ms_per_step"], "cpu_speedup": cpu_speedup(lora, full),
            "peak_rss_fraction": lora["peak_rss_mib"] / full["peak_rss_mib"],
            "trainable_params_fraction": lora["trainable_params"] / full["trainable_params"]}


def cpu_text(r):
    return f"{r['cpu_speedup']:.2f}x by CPU time" if r.get("cpu_speedup") else "CPU time not reported"


def pct(x):
    return f"{100 * x:.0f}%" if x else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident-bench", default=os.path.join(REPO, "build", "bench", "train_step_bench"))
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch (Debian's python3-torch)")
    ap.add_argument("--configs", default="tiny,small,124M")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="timed steps per run (0: 5 tiny/small, 3 for 124M)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="both frameworks' thread count")
    ap.add_argument("--checkpointing", default="none", help="trident's activation checkpointing")
    ap.add_argument("--torch-settings", default=None,
                    help="fix PyTorch's settings, skip the probe: e.g. allocator=tcmalloc,wait=PASSIVE,isa=avx512")
    ap.add_argument("--probe-steps", type=int, default=2, help="timed steps per probe run")
    ap.add_argument("--probe-on", default="small", choices=["small", "self"],
                    help="probe larger configs on `small` (fast) or on the config itself (what they run; "
                         "~10 minutes per precision for 124M)")
    ap.add_argument("--probe-margin", type=float, default=0.03,
                    help="a probed setting replaces the best so far only if this much faster (0.03: 3%%)")
    ap.add_argument("--lora", default="",
                    help="also LoRA runs: r=8,alpha=16,targets=q_proj,k_proj,v_proj,o_proj (targets left out: "
                         "LLaMA q/k/v/o_proj, GPT-2 c_attn,attn.c_proj)")
    ap.add_argument("--no-pytorch-full", action="store_true",
                    help="with --lora: skip PyTorch's full fine-tuning runs (trident LoRA, trident full, PyTorch LoRA)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lora-r", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--lora-alpha", type=float, default=16.0, help=argparse.SUPPRESS)
    ap.add_argument("--lora-targets", default="", help=argparse.SUPPRESS)
    ap.add_argument("--config", default="tiny", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    precisions = args.precisions.split(",")
    for n in args.configs.split(","):
        if n not in CONFIGS:
            sys.exit(f"--configs: unknown {n!r} (have {', '.join(CONFIGS)})")
    if not set(precisions) <= {"fp32", "bf16"}:
        sys.exit(f"--precisions: fp32 and/or bf16, got {args.precisions}")

    lora_spec = parse_lora(args.lora) if args.lora else None
    if args.no_pytorch_full and not lora_spec:
        sys.exit("--no-pytorch-full: only with --lora (PyTorch's full runs are the comparison without it)")
    cpu = cpu_info()
    cand = torch_candidates(cpu)
    fixed = parse_settings(args.torch_settings, cand) if args.torch_settings is not None else None
    if not 0.0 <= args.probe_margin < 1.0:
        sys.exit(f"--probe-margin: expected a fraction in [0, 1), got {args.probe_margin}")
    tri_env = dict(base_env(args.threads), OMP_WAIT_POLICY="PASSIVE")
    report = {"benchmark": "train_speed_compare", "cpu": cpu, "threads": args.threads, "precisions": precisions,
              "trident_checkpointing": args.checkpointing,
              "trident_settings": {"allocator": "trident caching allocator over glibc malloc (nothing preloaded)",
                                   "wait": "PASSIVE"},
              "pytorch_candidates": {k: dict(v) for k, v in cand.items()},
              "blas_alternative": os.path.realpath(os.path.join(LIBDIR, "libblas.so.3")),
              "pytorch_settings_fixed": settings_str(fixed) if fixed else None,
              "probe_margin": None if fixed else args.probe_margin, "stripped_env": stripped_env(),
              "lora": lora_spec, "probes": [], "configs": {}}
    gemm_flag = "--gemm-rates"
    chosen = {}  # (probe config, precision) -> settings
    for name in args.configs.split(","):
        c = CONFIGS[name]
        steps = args.steps or (3 if name in ("124M", "llama125M") else 5)
        tokens, flops_per_token = c["B"] * c["T"], None
        entry = {"shape": dict(c, V=vocab(c)), "timed_steps_per_run": steps, "reps": args.reps}
        lora = None
        if lora_spec:
            targets, note = lora_targets(lora_spec, c)
            lora = dict(lora_spec, targets=targets)
            entry["lora"] = dict(lora, targets_requested=lora_spec["targets"], targets_note=note)
            if note:
                print(f"{name}: --lora targets: {note} ({targets})", file=sys.stderr, flush=True)
        for prec in precisions:
            probe_config = name if args.probe_on == "self" else PROBE_ON[name]
            key = (probe_config, prec)
            if fixed:
                chosen[key] = fixed
            elif key not in chosen:
                chosen[key], record = probe(args, probe_config, prec, cand)
                report["probes"].append(record)
            setting = chosen[key]
            # The sides, run in this order each rep; without --lora trident and PyTorch, full fine-tuning.
            sides = ["trident", "pytorch"] if not lora else \
                ["trident_lora", "trident", "pytorch_lora"] + ([] if args.no_pytorch_full else ["pytorch"])
            runs = {side: [] for side in sides}
            # The GEMM rates in a process of their own: the timed runs below are plain ones, so
            # their peak RSS is the training step's alone.
            ceiling, gemm_flag, rates = trident_gemm_ceiling(args, c, prec, tri_env, gemm_flag)
            entry[prec] = {"gemm_ceiling_gflops": ceiling, "gemm_ceiling_from": gemm_flag,
                           "gemm_ceiling_process": "a separate train_step_bench run (1 step, no warm-up); "
                                                   "its RSS and times are not compared",
                           "gemm_rates": rates.get("gemm_rates"), "gemm_rates_seconds": rates.get("gemm_rates_seconds")}
            report["trident_gemm"] = {k: rates.get(k) for k in ("cpu_isa", "f32_gemm", "bf16_gemm")}
            for rep in range(args.reps):
                for side in sides:
                    side_lora = lora if side.endswith("_lora") else None
                    if side.startswith("trident"):
                        cmd, env = trident_cmd(args, c, steps, prec, lora_flags(side_lora) if side_lora else []), tri_env
                    else:
                        cmd = torch_cmd(args, name, steps, args.warmup, prec, side_lora)
                        env = torch_env(setting, cand, args.threads)
                    runs[side].append(run_child(cmd, env)[0])
            # train_step_bench's count (Note [MFU's N] in src/train/mfu.h: N without the
            # embedding tables a token only gathers; LoRA's frozen base: Note [MFU of a partly
            # frozen model]); an older binary: every parameter. A LoRA side uses trident LoRA's.
            flops_per_token = runs["trident"][0].get("flops_per_token") or \
                6 * runs["trident"][0]["params"] + 12 * c["L"] * c["C"] * c["T"]
            lora_flops = runs["trident_lora"][0].get("flops_per_token") if lora else None
            e = entry[prec]
            torch_side = runs["pytorch" if "pytorch" in runs else "pytorch_lora"][0]
            e["pytorch_settings"] = settings_str(setting)
            e.update({"pytorch_" + k: torch_side[k] for k in ("cpu_capability", "parallel_backend", "threads")})
            e["torch"] = torch_side["torch"]
            for fw, rs in runs.items():
                e[fw] = summarize(rs, tokens, lora_flops if fw.endswith("_lora") else flops_per_token, ceiling)
                if fw.endswith("_lora"):
                    e[fw]["lora_layers"] = len(rs[0]["lora"]["layers"])
            if "pytorch" in runs:
                e.update(ratios(e["trident"], e["pytorch"]))
                print(f"{name} {prec}: trident {e['trident']['tokens_per_s']:.0f} tok/s (MFU {pct(e['trident']['mfu'])}), "
                      f"PyTorch [{e['pytorch_settings']}] {e['pytorch']['tokens_per_s']:.0f} tok/s "
                      f"(MFU {pct(e['pytorch']['mfu'])}): {e['tokens_per_s_ratio']:.2f}x; peak RSS "
                      f"{e['trident']['peak_rss_mib']:.0f} vs {e['pytorch']['peak_rss_mib']:.0f} MiB "
                      f"({e['peak_rss_ratio']:.2f}x); ceiling {ceiling or 0:.0f} GFLOP/s", file=sys.stderr, flush=True)
            if lora:
                tl, pl = e["trident_lora"], e["pytorch_lora"]
                e["trident_lora_vs_full"] = lora_ratios(tl, e["trident"])
                e["trident_lora_vs_pytorch_lora"] = {"speedup": pl["ms_per_step"] / tl["ms_per_step"],
                                                     "cpu_speedup": cpu_speedup(tl, pl),
                                                     "peak_rss_ratio": tl["peak_rss_mib"] / pl["peak_rss_mib"]}
                if "pytorch" in runs:
                    e["pytorch_lora_vs_full"] = lora_ratios(pl, e["pytorch"])
                lf, lp = e["trident_lora_vs_full"], e["trident_lora_vs_pytorch_lora"]
                # Issue #48's targets.
                e["lora_targets_met"] = {"peak_rss_fraction_le_1/3": lf["peak_rss_fraction"] <= 1 / 3,
                                         "speedup_vs_full_ge_1.3": lf["speedup"] >= 1.3,
                                         "speedup_vs_pytorch_lora_ge_1.5": lp["speedup"] >= 1.5}
                print(f"{name} {prec} LoRA r={lora['r']} alpha={lora['alpha']:g} [{lora['targets']}], "
                      f"{tl['trainable_params']} trainable: trident LoRA {tl['ms_per_step']:.0f} ms/step, "
                      f"{tl['peak_rss_mib']:.0f} MiB; trident full {e['trident']['ms_per_step']:.0f} ms, "
                      f"{e['trident']['peak_rss_mib']:.0f} MiB ({lf['speedup']:.2f}x faster, {cpu_text(lf)}, RSS "
                      f"{lf['peak_rss_fraction']:.2f} of full); PyTorch LoRA {pl['ms_per_step']:.0f} ms, "
                      f"{pl['peak_rss_mib']:.0f} MiB (trident {lp['speedup']:.2f}x faster, {cpu_text(lp)}, RSS "
                      f"{lp['peak_rss_ratio']:.2f}x)", file=sys.stderr, flush=True)
        if "fp32" in entry and "bf16" in entry and "pytorch" in entry["fp32"]:
            entry["bf16_vs_pytorch_fp32"] = ratios(entry["bf16"]["trident"], entry["fp32"]["pytorch"])
            print(f"{name} trident bf16 vs PyTorch fp32: "
                  f"{entry['bf16_vs_pytorch_fp32']['tokens_per_s_ratio']:.2f}x tok/s, "
                  f"{entry['bf16_vs_pytorch_fp32']['peak_rss_ratio']:.2f}x peak RSS", file=sys.stderr, flush=True)
        report["configs"][name] = entry
    g = report.get("trident_gemm", {})
    print(f"CPU: {cpu['model_name']} (family {cpu['family']} model {cpu['model']}; {' '.join(cpu['flags'])}); "
          f"{args.threads} threads; trident GEMMs f32 {g.get('f32_gemm')}, bf16 {g.get('bf16_gemm')} "
          f"({g.get('cpu_isa')}); PyTorch candidates "
          + settings_str({a: "|".join(v) for a, v in cand.items()}), file=sys.stderr, flush=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
