#!/usr/bin/env python3
"""`trident serve` under load (issue #49): N concurrent streaming clients against one client.

Starts `trident serve` on a model, and for each --max-batch value runs --rounds rounds, each
one client for --seconds (the baseline, just before: the machine may be shared) and then
--clients concurrent clients for --seconds, reading the server's resident memory (VmRSS and
VmHWM from /proc/PID/status) after each round.
Every client is a thread that sends streaming completions (stream_options.include_usage) one
after another until its round's time is up, then finishes the one it is in; a request's prompt
is --prompt tokens of text and its max_tokens is drawn from [--tokens/2, 3 --tokens/2] (a fixed
seed per client and request, so rounds repeat; spread so that requests do not all end, and
prefill, in the same step). Greedy, so every run generates the same tokens.

Per round: throughput (tokens/s) = the tokens the server generated in the round's window
(its /metrics trident_serve_generated_tokens_total, from the start to --seconds later; the
requests still running then finish after the window, outside it; the client-side count with
that drain is reported too), the server's CPU seconds per token in the window (from
/proc/PID/stat: the machine may be shared, so one client's CPU per token over N clients' is
the speedup without other load), requests, time to first token (from sending a request to the
first chunk of its stream: the server sends one after the first token) p50/p99, and the mean
engine batch (/metrics' trident_serve_batch_size). Then the criteria of issue #49: throughput
of --clients clients / that of one client in the same round >= 4 in every round, and the
server's memory flat: VmRSS after the last round within --rss-tolerance-mib of after the first.

The model: --checkpoint DIR (anything `trident serve` reads, with --tokenizer/--vocab as
serve takes them); by default a GPT-2 124M-shaped model (L=12 C=768 NH=12 V=50257, context
1024) with random weights made under --work (one `trident train` step at lr 1e-9 on a small
byte corpus, reused when present), served with the GPT-2 tokenizer from --vocab.

Usage:
    nice -n 5 bench/serve_load.py [--trident build-dev/apps/trident] [--checkpoint DIR]
        [--vocab ../shared/data/gpt2] [--max-batch 32[,16,...]] [--clients 32] [--rounds 3]
        [--seconds 60] [--prompt 32] [--tokens 64] [--threads 2] [--out FILE]
Prints one JSON document on stdout (progress on stderr).
"""

import argparse
import datetime
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_gpt2_124m(trident, work, env):
    """A trident checkpoint of GPT-2 124M's shape with (near) initial weights, made once."""
    run = os.path.join(work, "gpt2-124M-random")
    made = os.path.join(work, "gpt2-124M-random.made")  # written once the run has ended
    if os.path.exists(made):
        return run
    os.makedirs(work, exist_ok=True)
    text = os.path.join(work, "corpus.txt")
    with open(text, "w") as f:
        for i in range(2000):
            f.write(f"line {i} of the corpus that only gives the run its shape.\n")
    data = os.path.join(work, "data")
    subprocess.run([trident, "prepare", "--out", data, "--tokenizer", "byte", text], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    log(f"serve_load: making a GPT-2 124M-shaped model in {run} (one step at lr 1e-9)")
    subprocess.run([trident, "train", "--model.n_layer=12", "--model.n_head=12", "--model.n_embd=768",
                    "--model.block_size=1024", "--model.vocab_size=50257", "--data.tokenizer=byte",
                    f"--data.train_file={data}/train.bin", f"--data.val_file={data}/val.bin", "--data.batch_size=1",
                    "--data.seq_len=64", "--train.steps=1", "--optim.lr=1e-9", f"--train.out_dir={run}"],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(made, "w").close()
    return run


def memory(pid):
    """(VmRSS, VmHWM) of pid in MiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kb = line.split()[:2]
                out[key[:-1]] = int(kb) / 1024
    return out["VmRSS"], out["VmHWM"]


def cpu_seconds(pid):
    """User + system CPU seconds of pid so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


GAUGES = ("trident_serve_host_memory_in_use_bytes", "trident_serve_host_memory_reserved_bytes")
COUNTERS = ("trident_serve_generated_tokens_total", "trident_serve_batch_size_count", "trident_serve_batch_size_sum",
            "trident_serve_connections_evicted_total", "trident_serve_deadline_expired_total",
            "trident_serve_connections_refused_total")


def server_counters(port):
    """The server's /metrics COUNTERS now, by name."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for name in COUNTERS + GAUGES:
        m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


PROMPT_WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
                "boxing matches in the old town square near the river").split()


def prompt_text(tokens, rng):
    # GPT-2's tokenizer takes each of these common words with its leading space as one token.
    return " ".join(rng.choice(PROMPT_WORDS) for _ in range(tokens))


def one_request(port, model, prompt, max_tokens):
    """(completion tokens, seconds to the first chunk, seconds in all) of one streamed completion."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:500]!r}")
    first = None
    tokens = None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        if first is None:
            first = time.perf_counter() - start
        if line == "data: [DONE]":
            break
        event = json.loads(line[6:])
        if "error" in event:
            raise RuntimeError(f"stream error: {event}")
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
    c.close()
    if tokens is None:
        raise RuntimeError("the stream ended without its usage")
    return tokens, first, time.perf_counter() - start


def run_round(port, pid, model, clients, seconds, prompt_tokens, tokens, seed):
    """The round's throughput, requests and TTFT percentiles, with every client's failures."""
    before = server_counters(port)
    cpu0 = cpu_seconds(pid)
    start = time.perf_counter()
    deadline = start + seconds
    results, errors = [], []
    lock = threading.Lock()

    def client(i):
        rng = random.Random(seed * 1000 + i)
        while time.perf_counter() < deadline:
            prompt = prompt_text(prompt_tokens, rng)
            max_tokens = rng.randint(max(1, tokens // 2), tokens * 3 // 2)
            try:
                r = one_request(port, model, prompt, max_tokens)
            except Exception as e:  # noqa: BLE001 (reported, not hidden)
                with lock:
                    errors.append(f"client {i}: {e}")
                return
            with lock:
                results.append(r)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    # The window: tokens the server generated from the start to the deadline (its counter
    # advances as the streams are written), the engine's steps and the server's CPU time in it.
    time.sleep(max(0.0, deadline - time.perf_counter()))
    in_window = server_counters(port)
    cpu1 = cpu_seconds(pid)
    window = time.perf_counter() - start
    load = os.getloadavg()[0]
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    after = server_counters(port)
    tokens0, steps0, sum0 = (before[k] for k in COUNTERS[:3])
    tokens1, steps1, sum1 = (in_window[k] for k in COUNTERS[:3])
    generated = sum(r[0] for r in results)
    ttft = sorted(r[1] for r in results)

    def pct(p):
        return ttft[min(len(ttft) - 1, int(round(p / 100 * (len(ttft) - 1))))] if ttft else None

    return {
        "clients": clients,
        "window_s": round(window, 2),
        "tokens_per_s": round((tokens1 - tokens0) / window, 2),
        "server_cpu_s_per_token": round((cpu1 - cpu0) / max(1.0, tokens1 - tokens0), 4),
        "load_average_1min": round(load, 2),
        "requests": len(results),
        "completion_tokens": generated,
        "wall_s_with_drain": round(wall, 2),
        "tokens_per_s_with_drain": round(generated / wall, 2),
        "ttft_p50_s": round(pct(50), 4) if ttft else None,
        "ttft_p99_s": round(pct(99), 4) if ttft else None,
        "request_s_median": round(statistics.median(r[2] for r in results), 3) if results else None,
        "engine_steps": int(steps1 - steps0),
        "mean_engine_batch": round((sum1 - sum0) / (steps1 - steps0), 2) if steps1 > steps0 else None,
        "errors": errors,
        # What the HTTP server's limits did in the round (drain included): all 0 unless a
        # connection was dropped for a newer one, ran past a deadline or was refused.
        "http_limits": {k.replace("trident_serve_", ""): int(after[k] - before[k]) for k in COUNTERS[3:]},
        # trident's host allocator after the round (its cache is part of the RSS).
        "allocator_in_use_mib": round(after[GAUGES[0]] / 2**20, 1),
        "allocator_reserved_mib": round(after[GAUGES[1]] / 2**20, 1),
    }


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown"
    name = re.search(r"Model name:\s*(.+)", out)
    flags = re.search(r"Flags:\s*(.+)", out)
    have = [f for f in ("avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
            if flags and f in flags.group(1).split()]
    return f"{name.group(1).strip() if name else 'unknown'} ({', '.join(have)})"


def serve_and_measure(args, model_dir, max_batch, env):
    cmd = [args.trident, "serve", "--checkpoint", model_dir, "--port", "0", "--model-name", "m",
           "--max-batch", str(max_batch), "--threads", str(args.threads), "--max-connections",
           str(max(64, 2 * args.clients))]
    if args.tokenizer:
        cmd += ["--tokenizer", args.tokenizer]
    if args.vocab:
        cmd += ["--vocab", args.vocab]
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if "http://" not in line:
            raise RuntimeError(f"serve did not start: {line!r} {server.stderr.read()[-2000:]}")
        log("serve_load:", line.strip())
        port = int(line.split("http://")[1].split("/")[0].rsplit(":", 1)[1])
        # Warm-up at full concurrency (--warmup seconds): the allocator's blocks for a full
        # batch's activations, the threads' first use; memory is compared from here on.
        run_round(port, server.pid, "m", args.clients, args.warmup, args.prompt, args.tokens, seed=99)
        rss_start, _ = memory(server.pid)
        singles, rounds = [], []
        for k in range(args.rounds):
            # One client just before each round: the machine may be shared, so each ratio
            # compares windows a minute apart rather than the first one with the last.
            log(f"serve_load: max batch {max_batch}: round {k + 1}: 1 client for {args.seconds} s")
            single = run_round(port, server.pid, "m", 1, args.seconds, args.prompt, args.tokens, seed=0)
            log("serve_load:", json.dumps(single))
            singles.append(single)
            log(f"serve_load: max batch {max_batch}: round {k + 1}: {args.clients} clients for {args.seconds} s")
            r = run_round(port, server.pid, "m", args.clients, args.seconds, args.prompt, args.tokens, seed=k + 1)
            r["rss_mib"], r["hwm_mib"] = memory(server.pid)
            log("serve_load:", json.dumps(r))
            rounds.append(r)
    finally:
        server.terminate()
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
    speedup = [round(r["tokens_per_s"] / one["tokens_per_s"], 2) for r, one in zip(rounds, singles)]
    cpu_ratio = [round(one["server_cpu_s_per_token"] / r["server_cpu_s_per_token"], 2) for r, one in zip(rounds, singles)]
    growth = rounds[-1]["rss_mib"] - rounds[0]["rss_mib"]
    return {
        "max_batch": max_batch,
        "rss_mib_after_warmup": rss_start,
        "one_client_per_round": singles,
        "rounds": rounds,
        "speedup_per_round": speedup,
        # The server's CPU seconds per token, one client's / N clients': the speedup the
        # batching would give if both had the CPU to themselves (the machine is shared).
        "cpu_per_token_ratio_per_round": cpu_ratio,
        "rss_mib_per_round": [round(r["rss_mib"], 1) for r in rounds],
        "allocator_reserved_mib_per_round": [r["allocator_reserved_mib"] for r in rounds],
        "rss_growth_first_to_last_round_mib": round(growth, 1),
        "criterion_4x": min(speedup) >= 4.0,
        "criterion_flat_memory": abs(growth) <= args.rss_tolerance_mib,
        "errors": sum(len(r["errors"]) for r in rounds + singles),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trident", default=os.path.join(REPO, "build-dev", "apps", "trident"))
    p.add_argument("--checkpoint", help="a model `trident serve` reads (default: a random GPT-2 124M made in --work)")
    p.add_argument("--work", default="/tmp/trident_serve_load")
    p.add_argument("--tokenizer", default=None, help="serve's --tokenizer (default: gpt2 for the made model)")
    p.add_argument("--vocab", default=None, help="serve's --vocab (default: ../shared/data/gpt2 for the made model)")
    p.add_argument("--max-batch", default="32", help="comma-separated --max-batch values, each its own server")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=20.0,
                   help="seconds of all the clients before the first round (not measured)")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens (words of a fixed list)")
    p.add_argument("--tokens", type=int, default=64, help="mean max_tokens per request")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rss-tolerance-mib", type=float, default=8.0,
                   help="flat memory: |VmRSS after the last round - after the first| at most this")
    p.add_argument("--out", help="also write the JSON here")
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE")
    model_dir = args.checkpoint
    if model_dir is None:
        model_dir = make_gpt2_124m(args.trident, args.work, env)
        args.tokenizer = args.tokenizer or "gpt2"
        args.vocab = args.vocab or os.path.join(REPO, "..", "shared", "data", "gpt2")
    results = [serve_and_measure(args, model_dir, int(b), env) for b in args.max_batch.split(",")]
    doc = {
        "bench": "serve_load",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "model": model_dir if args.checkpoint else "GPT-2 124M shape (L=12 C=768 NH=12 V=50257), random weights",
        "threads": args.threads,
        "clients": args.clients,
        "seconds_per_round": args.seconds,
        "prompt_tokens": args.prompt,
        "max_tokens_mean": args.tokens,
        "results": results,
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
