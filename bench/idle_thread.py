#!/usr/bin/env python3
"""Where one thread of a 2-thread run waits while the other works.

A sampling profile (`perf record -e cpu-clock`, no call graph needed) of both threads, written out
by `perf script -F tid,time,ip,sym,dso`, is read sample by sample. A sample in libgomp (or one
with no symbol: libgomp's spin loop is stripped) is a thread waiting at an OpenMP barrier; the
other thread's sample nearest in time (within half a sample period) says what it was running
meanwhile: a serial stretch of the program, or the tail of an unevenly split parallel loop.
Timing by wall clock on a VM whose speed drifts says little about a few milliseconds; this
counts the idle thread-milliseconds themselves.

    perf record -e cpu-clock -F 2000 -o perf.data build-dev/bench/decode_bench --B 8 --prompt 128 \\
        --tokens 1 --scheme int8 --threads 2 --reps 40
    perf script -i perf.data -F tid,time,ip,sym,dso > samples.txt
    bench/idle_thread.py samples.txt --runs 81 --hz 2000 [--window-symbol tile_avx512]

--runs: how many timed runs the window holds (decode_bench runs 2 per rep, and a warm-up), to
print milliseconds per run. --window-symbol: the window is from 0.3 s before this symbol's
first sample to its last (set-up before it is left out). Prints JSON on stdout.
"""
import argparse
import bisect
import collections
import json
import re


def short(symbol):
    symbol = re.sub(r"\(/.*\)$", "", symbol).strip()
    if "libgomp" in symbol or symbol.startswith("[unknown]") or not symbol:
        return "WAITING (libgomp)"
    for prefix in ("trident::", "kernels::cpu::", "(anonymous namespace)::"):
        symbol = symbol.replace(prefix, "")
    return symbol[:100]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("samples")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--hz", type=float, default=2000.0)
    ap.add_argument("--window-symbol", default="")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    rows = []
    with open(a.samples) as f:
        for line in f:
            m = re.match(r"\s*(\d+)\s+([\d.]+):\s+\S+\s+(.*)", line)
            if m:
                rows.append((int(m.group(1)), float(m.group(2)), short(m.group(3))))
    if a.window_symbol:
        times = [t for _, t, s in rows if a.window_symbol in s]
        rows = [r for r in rows if min(times) - 0.3 <= r[1] <= max(times) + 0.01]
    by_thread = collections.defaultdict(list)
    for r in rows:
        by_thread[r[0]].append(r)
    times = {t: [r[1] for r in v] for t, v in by_thread.items()}
    half = 0.5 / a.hz
    waiting = 0
    while_other = collections.Counter()
    for tid, samples in by_thread.items():
        for _, t, s in samples:
            if s != "WAITING (libgomp)":
                continue
            waiting += 1
            for other in by_thread:
                if other == tid:
                    continue
                i = bisect.bisect_left(times[other], t - half)
                if i < len(times[other]) and abs(times[other][i] - t) < half:
                    while_other[by_thread[other][i][2]] += 1
    ms = 1e3 / a.hz / a.runs
    print(json.dumps({
        "samples": len(rows),
        "threads": len(by_thread),
        "idle_thread_ms_per_run": waiting * ms,
        "busy_thread_ms_per_run": (len(rows) - waiting) * ms,
        "while_the_other_ran_ms_per_run": {s: round(n * ms, 2) for s, n in while_other.most_common(a.top)},
    }, indent=2))


if __name__ == "__main__":
    main()
