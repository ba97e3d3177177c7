#!/usr/bin/env python3
"""Where a GPU training step's time goes, kernel by kernel: trident vs PyTorch, side by side.

One steady-state step of GPT-2 (bf16, same L/C/NH/V/T/B on both sides), with no per-op
synchronization on either side:

trident   train_step_bench --profiler-range brackets its timed step with cudaProfilerStart/Stop
          (core/device_ops.h). Nsight Compute runs it with --profile-from-start off and one
          metric, gpu__time_duration.sum, clocks and caches left alone (--clock-control none
          --cache-control none): each kernel's GPU time. ncu replays nothing for one metric but
          serializes the kernels, so its timeline says nothing of gaps; when ncu cannot run (no
          ncu, ERR_NVGPUCTRPERM on runtimes that keep the counters from users, ...) the reason is
          in "ncu_error". Beside it (or instead), libtrident_kernel_trace.so (bench/
          cupti_kernel_trace.cc, a CUDA injection library) records the same range's kernels with
          CUPTI's activity timestamps, as torch.profiler does: per-kernel times without the
          counters, and the GPU's busy time and idle gaps inside the step.
          The step's wall time comes from a separate, un-profiled run (median of --steps).
PyTorch   bench/gpu_train_compare.py's model and step (torch.compile, flash SDPA, fused AdamW,
          bf16 autocast, clip_grad_norm_), warmed up, timed un-profiled with CUDA events, then
          one step under torch.profiler (CUDA activity): kernel events summed by name.

Both sides' kernels are grouped by name into the same categories (CATEGORIES). Writes one JSON
(--out; "-" prints it) and prints a table: category, trident ms, PyTorch ms, ratio. Every
subprocess has a time limit inside --budget seconds; a half that fails says why in its "error"
and the other half is kept.

    bench/gpu_kernel_profile.py --trident-bench build/bench/train_step_bench \\
        --trace-lib build/bench/libtrident_kernel_trace.so --out kernels.json
    bench/gpu_kernel_profile.py --self-test      # the parsers and categories, no GPU
"""

import argparse
import csv
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"124M": dict(L=12, C=768, NH=12), "350M": dict(L=24, C=1024, NH=16), "tiny": dict(L=2, C=128, NH=4)}
V = 50257

# Categories, first match wins (lower-cased full demangled names). trident's kernels are named
# in src/kernels/cuda/*.cu; PyTorch's: ATen's, cuBLAS/CUTLASS/nvjet GEMMs, flash/efficient/cuDNN
# attention, and Inductor's Triton kernels (triton_{poi,per,red}_fused_*: one category, as
# fusion crosses ops; triton_tem_* templates are GEMMs).
CATEGORIES = [
    ("memcpy/memset", r"^memcpy|^memset"),
    ("attention backward", r"tc_dq_kernel|tc_dkdv_kernel|gen_dq_kernel|gen_dkdv_kernel|row_dot_(vector_)?kernel|flash_bwd"
                           r"|fmha_bwd|fmha_cutlassb|attention_backward|attention_bwd|sdpa.*(bprop|dgrad|bwd)"),
    ("attention forward", r"tc_forward_kernel|gen_forward_kernel|flash_fwd|fmha_fwd|fmha_cutlassf"
                          r"|attention_forward|attention_fwd|sdpa.*(fprop|fwd)"),
    ("gemm", r"triton_tem|gemm|cublas|cutlass|nvjet|xmma|sm90_|sm80_|ampere_|hopper_|splitkreduce|gemv|matmul"),
    ("fused (triton)", r"triton_"),
    ("layernorm", r"layer_?norm|norm_dx|norm_forward|norm_param_partials|rmsnorm|rms_norm"),
    ("cross-entropy", r"cross_entropy|nll_loss|log_?softmax"),
    ("optimizer (adamw, grad norm)", r"adam|multi_tensor|sum_of_squares|lpnorm|foreach"),
    ("embedding", r"embedding|index_select|indexselect|sort_input|local_ids|radixsort|segment_offsets"
                  r"|compute_grad_weight|sum_and_scatter|partials_per_segment"),
    ("reductions", r"reduce|sum_partials|sum_chunks|sum_splits|sum_thread|sum_warp|sum_columns|softmax|sums_kernel"
                   r"|row_max"),
    ("elementwise", r"elementwise|unary|binary|convert|copy|fill|gelu|scale_shift|dropout|rope|zero_kernel|catarray"
                    r"|add_kernel|mul_kernel|arange"),
]
_CATEGORY_RE = [(n, re.compile(p)) for n, p in CATEGORIES]
OTHER = "other"


def categorize(name):
    low = name.lower()
    for cat, rx in _CATEGORY_RE:
        if rx.search(low):
            return cat
    return OTHER


def short_name(name, limit=160):
    """A kernel's name without 'void ' and its parameter list (templates kept), cut to `limit`."""
    n = name.strip()
    if n.startswith("void "):
        n = n[5:]
    depth = 0
    for i, ch in enumerate(n):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0 and i > 0 and not n.startswith("(anonymous", i):
            n = n[:i]
            break
    return n if len(n) <= limit else n[:limit - 3] + "..."


def summarize(kernels, steps=1, top=40):
    """kernels: [(name, ms)] over `steps` steps -> per-step totals by category and by short name."""
    total = sum(ms for _, ms in kernels) / steps
    cats, names = {}, {}
    for name, ms in kernels:
        c = cats.setdefault(categorize(name), {"count": 0, "ms": 0.0})
        c["count"] += 1
        c["ms"] += ms
        k = names.setdefault(short_name(name), {"category": categorize(name), "count": 0, "ms": 0.0})
        k["count"] += 1
        k["ms"] += ms
    for d in list(cats.values()) + list(names.values()):
        d["count"] = d["count"] / steps if steps > 1 else d["count"]
        d["ms"] = round(d["ms"] / steps, 4)
        d["share"] = round(d["ms"] / total, 4) if total else 0.0
    ranked = sorted(names.items(), key=lambda kv: -kv[1]["ms"])
    return {"kernel_ms": round(total, 4), "kernel_count": len(kernels) / steps if steps > 1 else len(kernels),
            "categories": dict(sorted(cats.items(), key=lambda kv: -kv[1]["ms"])),
            "kernels": [dict(name=n, **d) for n, d in ranked[:top]], "kernels_left_out": max(len(ranked) - top, 0)}


# ---- Nsight Compute's CSV ----------------------------------------------------------------------

_UNIT_MS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
            "s": 1e3, "second": 1e3}


def _number(text):
    return float(text.replace(",", "").strip())  # ncu prints thousands separators: "1,234,567"


def parse_ncu_csv(text, metric="gpu__time_duration.sum"):
    """[(kernel name, ms)] from `ncu --csv` output, the details page (one row per kernel and
    metric: ..."Kernel Name",...,"Metric Name","Metric Unit","Metric Value") or --page raw (one
    row per kernel, a column per metric, a row of units under the header). Lines before the
    header (==PROF== notes, the program's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"') and '"Kernel Name"' in l), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(l for l in lines[start:] if l.startswith('"')))))
    header, body = rows[0], rows[1:]
    col = {h: i for i, h in enumerate(header)}
    out = []
    if "Metric Name" in col:  # details page
        for r in body:
            if len(r) != len(header) or r[col["Metric Name"]] != metric:
                continue
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else "ns"
            out.append((r[col["Kernel Name"]], _number(r[col["Metric Value"]]) * _UNIT_MS.get(unit, 1e-6)))
    elif metric in col:  # raw page
        unit = "ns"
        if body and body[0][col["ID"]] == "":  # the units row
            unit = body[0][col[metric]] or "ns"
            body = body[1:]
        for r in body:
            if len(r) == len(header) and r[col[metric]] not in ("", "n/a"):
                out.append((r[col["Kernel Name"]], _number(r[col[metric]]) * _UNIT_MS.get(unit, 1e-6)))
    return out


# ---- the CUPTI trace (bench/cupti_kernel_trace.cc) ---------------------------------------------

def parse_trace(text):
    """(kernels [(name, ms)], timeline) from libtrident_kernel_trace.so's file: a '# range' line,
    then start_ns, end_ns, name per kernel. timeline: the range's length, the span from the first
    kernel's start to the last one's end, the GPU's busy time (union of kernel intervals) and the
    idle time inside the span with its largest gaps."""
    rng, spans = None, []
    for line in text.splitlines():
        parts = line.split("\t", 2)
        if line.startswith("# range") and len(parts) == 3:
            rng = (int(parts[1]), int(parts[2].split("\t")[0]))
        elif len(parts) == 3 and not line.startswith("#"):
            spans.append((int(parts[0]), int(parts[1]), parts[2]))
    spans.sort()
    kernels = [(n, (e - s) / 1e6) for s, e, n in spans]
    timeline = {}
    if spans:
        busy, gaps, cur_s, cur_e = 0, [], spans[0][0], spans[0][1]
        for s, e, n in spans[1:]:
            if s > cur_e:
                busy += cur_e - cur_s
                gaps.append((s - cur_e, n))
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        busy += cur_e - cur_s
        span = spans[-1][1] - spans[0][0]
        gaps.sort(reverse=True)
        timeline = {"span_ms": span / 1e6, "busy_ms": busy / 1e6, "idle_ms": (span - busy) / 1e6,
                    "gaps_over_10us": sum(1 for g, _ in gaps if g > 10_000),
                    "largest_gaps": [{"ms": g / 1e6, "before": short_name(n, 100)} for g, n in gaps[:10]]}
        if rng and rng[0] and rng[1] > rng[0]:
            timeline["range_ms"] = (rng[1] - rng[0]) / 1e6
    return kernels, timeline


# ---- running things ----------------------------------------------------------------------------

class Budget:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def limit(self, cap, keep=0.0):
        """Seconds for the next subprocess: at most cap, leaving `keep` for what comes after."""
        return max(min(cap, self.left() - keep), 0.0)


def run(cmd, timeout, env=None, min_s=5.0):
    """(returncode or None on timeout/start failure, stdout, stderr, seconds); not started with
    under min_s seconds."""
    t0 = time.monotonic()
    if timeout < min_s:
        return None, "", f"skipped: {timeout:.0f} s left of the budget", 0.0
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err + f"\ntimed out after {timeout:.0f} s", time.monotonic() - t0
    except OSError as e:
        return None, "", str(e), time.monotonic() - t0


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                pass
    return None


def find_ncu():
    for c in [shutil.which("ncu"), "/usr/local/cuda/bin/ncu", *sorted(
            __import__("glob").glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]:
        if c and os.access(c, os.X_OK):
            return c
    return None


def trident_half(args, budget):
    c = SIZES[args.size]
    model = ["--layers", str(c["L"]), "--embd", str(c["C"]), "--heads", str(c["NH"]), "--vocab", str(V),
             "--T", str(args.T), "--B", str(args.batch), "--device", "cuda", "--precision", "bf16"]
    bench = [args.trident_bench] + model
    res = {"command": " ".join(bench)}
    env = dict(os.environ, LC_ALL="C")
    # 1. the step's wall time, un-profiled
    rc, out, err, sec = run(bench + ["--steps", str(args.steps), "--warmup", str(args.warmup)],
                            budget.limit(args.wall_timeout, keep=args.keep_for_torch), env)
    j = last_json(out)
    if rc == 0 and j:
        res.update(median_step_ms=j["median_step_ms"], step_ms=j["step_ms"][args.warmup:], wall_run_s=round(sec, 1))
    else:
        res["wall_error"] = (err or out)[-1500:]
    profiled = bench + ["--steps", "1", "--warmup", str(args.profile_warmup), "--profiler-range"]
    # 2. Nsight Compute: each kernel's GPU time in the one profiled step
    ncu = args.ncu or find_ncu()
    if args.no_ncu:
        res["ncu_error"] = "not run (--no-ncu)"
    elif not ncu:
        res["ncu_error"] = "no ncu on PATH"
    else:
        cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--cache-control", "none",
               "--metrics", "gpu__time_duration.sum", "--csv", "--print-units", "base"] + profiled
        res["ncu_command"] = " ".join(cmd)
        rc, out, err, sec = run(cmd, budget.limit(args.ncu_timeout, keep=args.keep_for_torch), env)
        kernels = parse_ncu_csv(out)
        res["ncu_run_s"] = round(sec, 1)
        if kernels:
            res["ncu"] = summarize(kernels, top=args.top)
            if rc != 0:
                res["ncu_warning"] = f"exit {rc}: {(err or out)[-500:]}"
        else:
            text = (err + "\n" + out)
            why = "ERR_NVGPUCTRPERM: this runtime keeps the GPU's performance counters from users" \
                if "ERR_NVGPUCTRPERM" in text else f"exit {rc}, no kernels in its CSV"
            res["ncu_error"] = why + ": " + "\n".join(l for l in text.splitlines() if l.strip())[-1500:]
    # 3. CUPTI's activity timestamps for the same range (and the GPU's gaps)
    lib = args.trace_lib or os.path.join(os.path.dirname(os.path.abspath(args.trident_bench)),
                                         "libtrident_kernel_trace.so")
    if not os.path.exists(lib):
        res["trace_error"] = f"no {lib} (built with TRIDENT_CUDA and CUPTI)"
    elif "ncu" in res and args.trace == "fallback":
        res["trace_error"] = "not run (ncu worked; --trace always runs it too)"
    else:
        path = os.path.abspath(args.trace_out)
        tenv = dict(env, CUDA_INJECTION64_PATH=os.path.abspath(lib), TRIDENT_KERNEL_TRACE_OUT=path)
        cupti_dir = os.path.join(os.path.dirname(os.path.abspath(lib)), "cupti")  # scripts/gpu/pack.sh puts it there
        if os.path.isdir(cupti_dir):
            tenv["LD_LIBRARY_PATH"] = cupti_dir + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        if os.path.exists(path):
            os.remove(path)
        rc, out, err, sec = run(profiled, budget.limit(args.wall_timeout, keep=args.keep_for_torch), tenv)
        try:
            kernels, timeline = parse_trace(open(path).read())
        except OSError:
            kernels, timeline = [], {}
        if kernels:
            res["cupti"] = summarize(kernels, top=args.top)
            res["cupti"]["timeline"] = timeline
            if "range_ms" not in timeline:
                res["trace_warning"] = "no cudaProfilerStart/Stop seen: these are all the run's kernels"
            j = last_json(out)
            if j:
                res["cupti"]["traced_step_ms"] = j["step_ms"][-1]
        else:
            res["trace_error"] = f"exit {rc}, no kernels traced: {(err or out)[-1500:]}"
    best = res.get("ncu") or res.get("cupti")
    if best:
        res["kernel_source"] = "ncu" if "ncu" in res else "cupti"
        res["kernel_ms"] = best["kernel_ms"]
        if "median_step_ms" in res:
            res["gap_ms"] = round(res["median_step_ms"] - best["kernel_ms"], 3)
            res["kernel_fraction_of_wall"] = round(best["kernel_ms"] / res["median_step_ms"], 4)
    else:
        res["error"] = "no per-kernel times: " + res.get("ncu_error", "")[:300] + " | " + res.get("trace_error", "")[:300]
    return res


def torch_worker(args):
    """In its own process: PyTorch's steps, timed, then one under torch.profiler. Prints JSON."""
    sys.path.insert(0, HERE)
    import torch
    from gpu_train_compare import build_torch_gpt, timed_torch_steps, torch_train_step

    c = SIZES[args.size]
    B, T = args.batch, args.T
    model, step_fn, params = build_torch_gpt(c["L"], c["C"], c["NH"], T, compile=not args.no_compile)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    times, _, idx, tgt = timed_torch_steps(model, step_fn, opt, B, T, args.warmup + args.steps, fresh_batches=False)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch_train_step(model, step_fn, opt, idx, tgt)
        torch.cuda.synchronize()
    kernels, spans, annotations = [], [], set()
    for e in prof.events():
        if "cuda" not in str(getattr(e, "device_type", "")).lower():
            continue
        # Kineto also puts user annotations (compiled regions, "## Call CompiledFxGraph ##") on the
        # GPU's timeline, spanning the kernels they launched: not kernels, and they would count twice.
        if getattr(e, "is_user_annotation", False) or e.name.startswith("##") or "Region" in e.name \
                or "CompiledFunction" in e.name or e.name.startswith(("ProfilerStep", "aten::", "autograd::")):
            annotations.add(e.name)
            continue
        us = e.time_range.elapsed_us()
        kernels.append((e.name, us / 1e3))
        spans.append((e.time_range.start, e.time_range.end))
    res = {"torch": torch.__version__, "compiled": not args.no_compile, "params": params,
           "median_step_ms": statistics.median(times[args.warmup:]), "step_ms": times[args.warmup:],
           "kernel_source": "torch.profiler (device events of one step)"}
    if kernels:
        res["profile"] = summarize(kernels, top=args.top)
        res["kernel_ms"] = res["profile"]["kernel_ms"]
        res["profiled_span_ms"] = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e3
        res["annotations_skipped"] = sorted(annotations)[:20]
        res["gap_ms"] = round(res["median_step_ms"] - res["kernel_ms"], 3)
        res["kernel_fraction_of_wall"] = round(res["kernel_ms"] / res["median_step_ms"], 4)
    else:
        res["error"] = "torch.profiler recorded no device events"
    print(json.dumps(res))


def torch_half(args, budget):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--size", args.size, "--batch", str(args.batch),
           "--T", str(args.T), "--steps", str(args.steps), "--warmup", str(args.warmup), "--top", str(args.top)]
    if args.no_compile:
        cmd.append("--no-compile")
    rc, out, err, sec = run(cmd, budget.limit(args.torch_timeout))
    j = last_json(out)
    if rc == 0 and j:
        j["run_s"] = round(sec, 1)
        return j
    return {"error": f"exit {rc}: {(err or out)[-2000:]}", "run_s": round(sec, 1)}


def table(result):
    t, p = result.get("trident", {}), result.get("pytorch", {})
    tc = (t.get("ncu") or t.get("cupti") or {}).get("categories", {})
    pc = p.get("profile", {}).get("categories", {})
    cats = sorted(set(tc) | set(pc), key=lambda k: -max(tc.get(k, {}).get("ms", 0), pc.get(k, {}).get("ms", 0)))
    lines = [f"{'category':30s} {'trident ms':>10s} {'torch ms':>9s} {'ratio':>6s}   (trident kernels from "
             f"{t.get('kernel_source', 'nowhere')})"]

    def row(name, a, b):
        ratio = f"{a / b:6.2f}" if a and b else "     -"
        fa = f"{a:10.2f}" if a is not None else f"{'-':>10s}"
        fb = f"{b:9.2f}" if b is not None else f"{'-':>9s}"
        lines.append(f"{name:30s} {fa} {fb} {ratio}")

    for k in cats:
        row(k, tc.get(k, {}).get("ms"), pc.get(k, {}).get("ms"))
    row("= all kernels", t.get("kernel_ms"), p.get("kernel_ms"))
    row("step wall (un-profiled median)", t.get("median_step_ms"), p.get("median_step_ms"))
    row("wall - kernels (GPU idle)", t.get("gap_ms"), p.get("gap_ms"))
    tl = t.get("cupti", {}).get("timeline")
    if tl:
        lines.append(f"trident CUPTI timeline: span {tl['span_ms']:.2f} ms, busy {tl['busy_ms']:.2f}, idle "
                     f"{tl['idle_ms']:.2f} ({tl['gaps_over_10us']} gaps > 10 us)")
    for side, r in (("trident", t), ("pytorch", p)):
        if "error" in r:
            lines.append(f"{side}: {r['error'].strip().splitlines()[-1][:300] if r['error'].strip() else '?'}")
    if "ncu_error" in t:
        lines.append(f"ncu: {t['ncu_error'][:300]}")
    return "\n".join(lines)


# ---- self-test (no GPU) ------------------------------------------------------------------------

_DETAILS = '''==PROF== Connected to process 4242 (/tmp/trident-gpu/bin/train_step_bench)
step 1: 812 ms, loss 10.9876
==PROF== Profiling "gemm" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::(anonymous namespace)::embedding_forward_kernel<__nv_bfloat16>(const int *, __nv_bfloat16 *, long)","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","12,512"
"1","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::layernorm_forward_kernel<__nv_bfloat16, 4>(__nv_bfloat16 *, float *, float *, const __nv_bfloat16 *, int)","1","7","(256, 1, 1)","(2048, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","20,000"
"2","4242","train_step_bench","127.0.0.1","nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,250,000"
"3","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::tc_forward_kernel<__nv_bfloat16, 64>(trident::kernels::cuda::View<__nv_bfloat16>, float *)","1","7","(128, 1, 1)","(16, 192, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","500,000"
"4","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::tc_dkdv_kernel<__nv_bfloat16, 64>(trident::kernels::cuda::View<__nv_bfloat16>)","1","7","(128, 1, 1)","(16, 192, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","900,000"
"5","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::cross_entropy_forward_kernel<__nv_bfloat16>(float *, const __nv_bfloat16 *, const int *, long, long)","1","7","(1024, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","2,000,000"
"6","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::adamw_multi_kernel(trident::kernels::cuda::AdamWChunks)","1","7","(256, 1, 1)","(1200, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,500.5"
"7","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::binary_vector_kernel<__nv_bfloat16, 0>(__nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","30,000"
"8","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::binary_vector_kernel<__nv_bfloat16, 0>(__nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","30,000"
"9","4242","train_step_bench","127.0.0.1","void trident::kernels::cuda::sum_partials_kernel<float>(float *, const float *, int)","1","7","(512, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","4,000"
{"framework":"trident","median_step_ms":812.0,"step_ms":[900.0,850.0,812.0]}
==PROF== Disconnected from process 4242
'''
_RAW = '''==PROF== Connected to process 7 (x)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum"
"","","","","","","","","","","","nsecond"
"0","7","x","h","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char *, 1>>(int, at::native::FillFunctor<float>, at::detail::Array<char *, 1>)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","2,048"
"1","7","x","h","sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","3,000,000"
'''
_TRACE = "# range\t1000\t9000000\n1000000\t2000000\tvoid a::layernorm_forward_kernel<float>(float *)\n" \
         "2000500\t5000000\tnvjet_sm90_tst_128x256_64x4\n3000000\t4000000\tvoid a::gelu_kernel(float *)\n" \
         "5100000\t6000000\ttriton_per_fused_native_layer_norm_0\n"


def self_test():
    cases = {  # name -> category, trident's and PyTorch's (torch 2.x on Hopper) kernel names
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>, true>(Flash_fwd_params)":
            "attention forward",
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64>>(Flash_bwd_params)":
            "attention backward",
        "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64>>(Flash_bwd_params)":
            "attention backward",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<>::Params)": "attention forward",
        "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<>::Params)":
            "attention backward",
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0": "attention backward",
        "void trident::kernels::cuda::row_dot_kernel<__nv_bfloat16>(float *, const __nv_bfloat16 *)": "attention backward",
        "void trident::kernels::cuda::gen_forward_kernel<float>(float *)": "attention forward",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_cublas": "gemm",
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT": "gemm",
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)": "gemm",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(cublasLt::cublasSplitKParams<float>)":
            "gemm",
        "triton_tem_fused_mm_0": "gemm",
        "triton_per_fused__to_copy_add_native_layer_norm_1": "fused (triton)",
        "triton_red_fused__log_softmax_backward_data_nll_loss_backward_2": "fused (triton)",
        "triton_poi_fused_gelu_3": "fused (triton)",
        "void trident::kernels::cuda::norm_dx_vec_kernel<__nv_bfloat16>(__nv_bfloat16 *)": "layernorm",
        "void trident::kernels::cuda::norm_param_partials_kernel<__nv_bfloat16>(float *)": "layernorm",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)": "layernorm",
        "void trident::kernels::cuda::cross_entropy_backward_kernel<__nv_bfloat16>(__nv_bfloat16 *)": "cross-entropy",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, LogSoftMaxForwardEpilogue>"
        "(float *, const float *, int)": "cross-entropy",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor<"
        "float, 4, ADAM_MODE::ADAMW, false>>(TensorListMetadata<4>)": "optimizer (adamw, grad norm)",
        "void at::native::lpnorm_cleanup<float, NormType::L2, float, float>(const float *, TensorListAddresses)":
            "optimizer (adamw, grad norm)",
        "void trident::kernels::cuda::sum_of_squares_multi_kernel(trident::kernels::cuda::Chunks)":
            "optimizer (adamw, grad norm)",
        "void trident::kernels::cuda::adamw_kernel<float>(float *)": "optimizer (adamw, grad norm)",
        "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>(long *)":
            "embedding",
        "void trident::kernels::cuda::embedding_rows_kernel<__nv_bfloat16>(__nv_bfloat16 *)": "embedding",
        "void at::native::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(TensorInfo<float>)":
            "embedding",
        "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<Policy900, false, long, long>(long *)": "embedding",
        "void trident::kernels::cuda::sum_warp_kernel<float>(float *)": "reductions",
        "trident::<unnamed>::sum_columns_vector_kernel<__nv_bfloat16>": "reductions",
        "trident::<unnamed>::row_dot_vector_kernel<__nv_bfloat16, 8>": "attention backward",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>(R)":
            "reductions",
        "void trident::kernels::cuda::convert_contiguous_kernel<float, __nv_bfloat16>(__nv_bfloat16 *)": "elementwise",
        "void trident::kernels::cuda::unary_backward_kernel<__nv_bfloat16, 3>(__nv_bfloat16 *)": "elementwise",
        "void trident::kernels::cuda::zero_kernel(float *, long)": "elementwise",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)": "elementwise",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 64, 64>(float *)":
            "elementwise",
        "Memcpy DtoD (Device -> Device)": "memcpy/memset",
        "Memset (Device)": "memcpy/memset",
        "some_unknown_kernel": OTHER,
    }
    bad = [(n, categorize(n), c) for n, c in cases.items() if categorize(n) != c]
    assert not bad, "miscategorized:\n" + "\n".join(f"  {n[:90]}: {got}, want {want}" for n, got, want in bad)

    assert short_name("void a::b::(anonymous namespace)::k<float, 4>(float *, int)") == \
        "a::b::(anonymous namespace)::k<float, 4>", short_name("void a::b::(anonymous namespace)::k<float, 4>(float *, int)")
    assert short_name("nvjet_sm90_tst_256x128") == "nvjet_sm90_tst_256x128"

    k = parse_ncu_csv(_DETAILS)
    assert len(k) == 10, k
    s = summarize(k)
    approx = lambda a, b: abs(a - b) < 2e-4  # noqa: E731  (summaries round to 0.1 us)
    assert approx(s["kernel_ms"], 0.012512 + 0.02 + 1.25 + 0.5 + 0.9 + 2.0 + 1.5005 + 0.06 + 0.004), s["kernel_ms"]
    cats = s["categories"]
    assert approx(cats["gemm"]["ms"], 1.25) and approx(cats["optimizer (adamw, grad norm)"]["ms"], 1.5005), cats
    assert cats["elementwise"]["count"] == 2 and approx(cats["elementwise"]["ms"], 0.06), cats
    assert set(cats) == {"embedding", "layernorm", "gemm", "attention forward", "attention backward", "cross-entropy",
                         "optimizer (adamw, grad norm)", "elementwise", "reductions"}, set(cats)
    assert s["kernels"][0]["name"] == "trident::kernels::cuda::cross_entropy_forward_kernel<__nv_bfloat16>", s["kernels"][0]
    assert last_json(_DETAILS)["median_step_ms"] == 812.0

    r = parse_ncu_csv(_RAW)
    assert [round(ms, 6) for _, ms in r] == [0.002048, 3.0], r
    assert [categorize(n) for n, _ in r] == ["elementwise", "gemm"]
    assert parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n") == []

    k, tl = parse_trace(_TRACE)
    assert len(k) == 4 and approx(sum(ms for _, ms in k), 1.0 + 2.9995 + 1.0 + 0.9), k
    assert approx(tl["span_ms"], 5.0) and approx(tl["busy_ms"], 1.0 + 2.9995 + 0.9), tl
    assert approx(tl["idle_ms"], 0.0005 + 0.1) and tl["gaps_over_10us"] == 1, tl
    assert tl["largest_gaps"][0]["before"] == "triton_per_fused_native_layer_norm_0", tl
    assert approx(tl["range_ms"], 8.999), tl

    b = Budget(100)
    assert 99 < b.limit(1000) <= 100 and b.limit(30) == 30 and 0 < b.limit(1000, keep=90) <= 10
    rc, out, err, _ = run([sys.executable, "-c", "import time; time.sleep(5)"], 1)
    assert rc is None and "skipped" in err, err
    rc, out, err, _ = run([sys.executable, "-c", "import time; print('x'); time.sleep(30)"], 0.5, min_s=0)
    assert rc is None and "timed out" in err, err

    print(table({"trident": {"ncu": s, "kernel_source": "ncu", "kernel_ms": s["kernel_ms"], "median_step_ms": 8.0,
                             "gap_ms": 8.0 - s["kernel_ms"]},
                 "pytorch": {"error": "exit 1: no GPU (self-test)"}}))
    print("self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident-bench", default="build/bench/train_step_bench")
    ap.add_argument("--trace-lib", default="", help="libtrident_kernel_trace.so (default: beside --trident-bench)")
    ap.add_argument("--trace", choices=["always", "fallback", "never"], default="always",
                    help="run the CUPTI trace always, only when ncu gives nothing, or never")
    ap.add_argument("--trace-out", default="/tmp/trident_kernel_trace.tsv")
    ap.add_argument("--ncu", default="", help="the ncu binary (default: on PATH)")
    ap.add_argument("--no-ncu", action="store_true")
    ap.add_argument("--size", default="124M", choices=sorted(SIZES))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5, help="un-profiled steps timed for the wall time (median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profile-warmup", type=int, default=2, help="trident's steps before the profiled one")
    ap.add_argument("--top", type=int, default=40, help="kernel names kept per side, by time")
    ap.add_argument("--only", choices=["both", "trident", "torch"], default="both")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--budget", type=float, default=170.0, help="seconds for everything")
    ap.add_argument("--wall-timeout", type=float, default=40.0)
    ap.add_argument("--ncu-timeout", type=float, default=75.0)
    ap.add_argument("--torch-timeout", type=float, default=120.0)
    ap.add_argument("--keep-for-torch", type=float, default=80.0, help="seconds the trident half leaves for torch")
    ap.add_argument("--out", default="gpu_kernel_profile.json", help='the JSON file; "-": stdout')
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.torch_worker:
        return torch_worker(args)
    if args.trace == "never":
        args.trace_lib = "/nonexistent"
    budget = Budget(args.budget)
    c = SIZES[args.size]
    result = {"config": dict(size=args.size, B=args.batch, T=args.T, V=V, **c, precision="bf16"),
              "categories": [n for n, _ in CATEGORIES] + [OTHER],
              "notes": "ms are per step; trident: one step after --profile-warmup steps (ncu gpu__time_duration.sum, "
                       "serialized; cupti: activity timestamps); pytorch: one step under torch.profiler after "
                       "--warmup + --steps; median_step_ms: un-profiled; gap_ms = median_step_ms - kernel_ms"}
    if args.only in ("both", "trident"):
        try:
            result["trident"] = trident_half(args, budget)
        except Exception as e:  # keep the other half
            result["trident"] = {"error": f"{type(e).__name__}: {e}"}
    if args.only in ("both", "torch"):
        try:
            result["pytorch"] = torch_half(args, budget)
        except Exception as e:
            result["pytorch"] = {"error": f"{type(e).__name__}: {e}"}
    t, p = result.get("trident", {}), result.get("pytorch", {})
    if t.get("kernel_ms") and p.get("kernel_ms"):
        result["ratio_kernel_ms"] = t["kernel_ms"] / p["kernel_ms"]
    if t.get("median_step_ms") and p.get("median_step_ms"):
        result["ratio_step_ms"] = t["median_step_ms"] / p["median_step_ms"]
    text = json.dumps(result, indent=1)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
