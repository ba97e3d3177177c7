#!/usr/bin/env python3
"""Debian's Prometheus scrapes a 2-rank `trident launch` run (issue #23): a temporary config
with a 1 s scrape interval points at both ranks' endpoints (monitor.port + local rank, free
loopback ports); the test reads trident_loss, trident_tokens_per_second and
trident_memory_bytes back per rank through Prometheus' HTTP query API (/api/v1/query).
Then it pauses the run (`trident ctl pause`), waits for a scrape taken after the pause, and
requires Prometheus' values to equal what each rank's GET /metrics says (the numbers arrive
unchanged) and trident_step to be the paused step on both ranks; `ctl stop` ends the run
(exit 75). Skips, saying so, where the prometheus binary is missing. No timing assertions:
only generous deadlines.

    prometheus_scrape_test.py TRIDENT
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import runlib  # noqa: E402

SKIP = 77
STOPPED = 75
DEADLINE = 180
TOKEN = "prometheus-test-token"


def query(prom_port, expr):
    """The instant vector of `expr` as {rank: (timestamp, value string)}; {} when not ready."""
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        body = json.loads(runlib.get(url))
    except (OSError, ValueError):
        return {}
    if body.get("status") != "success":
        return {}
    return {r["metric"].get("rank"): (float(r["value"][0]), r["value"][1]) for r in body["data"]["result"]}


def scraped(text, name, labels):
    """The value of name{labels...} on a /metrics page (labels: the pairs after job and rank)."""
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if m and m.group(1) == name and all(f'{k}="{v}"' in m.group(2) for k, v in labels.items()):
            return m.group(3)
    return None


def same_number(a, b):
    return a is not None and b is not None and (a == b or float(a) == float(b))


def main():
    trident = sys.argv[1]
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        print("SKIP: the prometheus binary is not installed (Debian package prometheus; scripts/install-deps.sh)")
        return SKIP
    failures = []
    env = dict(os.environ, OMP_NUM_THREADS="1", TRIDENT_CONTROL_TOKEN=TOKEN)
    with tempfile.TemporaryDirectory() as d:
        runlib.prepare_corpus(trident, d, env)
        port = runlib.free_port(2)
        run = os.path.join(d, "run")
        train = subprocess.Popen([trident, "launch", "-n", "2", "--", "train"] + runlib.tiny_args(d) +
                                 ["--train.steps=1000000", "--train.eval_interval=0", f"--train.out_dir={run}",
                                  f"--monitor.port={port}", "--monitor.job=scrape_test"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        prom_port = runlib.free_port()
        config = os.path.join(d, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: trident
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:{port}", "127.0.0.1:{port + 1}"]
""")
        prom = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={d}/tsdb",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            check(failures, trident, env, port, prom_port, train, prom)
        finally:
            if train.poll() is None:
                subprocess.run([trident, "ctl", f"http://127.0.0.1:{port}", "stop"], env=env,
                               capture_output=True, timeout=60)
            try:
                _, err = train.communicate(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                train.kill()
                _, err = train.communicate()
                failures.append("the run did not end after ctl stop")
            if train.returncode != STOPPED:
                failures.append(f"run: exit {train.returncode}, not {STOPPED} (stopped)\n{err[-3000:]}")
            prom.terminate()
            try:
                _, perr = prom.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                prom.kill()
                _, perr = prom.communicate()
            if failures:
                print("prometheus stderr (tail):\n" + perr[-2000:], file=sys.stderr)
    return runlib.report("prometheus_scrape", failures)


def check(failures, trident, env, port, prom_port, train, prom):
    # 1. Both ranks' series arrive while the run trains.
    exprs = {"loss": 'trident_loss{job="scrape_test"}',
             "tokens/s": 'trident_tokens_per_second{job="scrape_test"}',
             "parameter bytes": 'trident_memory_bytes{job="scrape_test",category="parameter"}'}
    deadline, got = time.time() + DEADLINE, {}
    while time.time() < deadline and train.poll() is None and prom.poll() is None:
        got = {k: query(prom_port, e) for k, e in exprs.items()}
        if all(set(v) >= {"0", "1"} and all(val != "NaN" for _, val in v.values()) for v in got.values()):
            break
        time.sleep(0.5)
    else:
        failures.append(f"Prometheus did not return both ranks' series within {DEADLINE} s: {got} "
                        f"(run exit {train.poll()}, prometheus exit {prom.poll()})")
        return
    for what, v in got.items():
        for rank in ("0", "1"):
            x = float(v[rank][1])
            if not (x > 0 and x < float("inf")):
                failures.append(f"{what} of rank {rank} from Prometheus: {v[rank][1]}")
    print("from Prometheus:", {k: {r: v[r][1] for r in sorted(v)} for k, v in got.items()})
    # 2. Paused: a scrape after the pause equals each rank's /metrics.
    r = subprocess.run([trident, "ctl", f"http://127.0.0.1:{port}", "pause"], env=env, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        failures.append(f"ctl pause: exit {r.returncode}: {r.stdout}{r.stderr}")
        return
    deadline, s = time.time() + DEADLINE, None
    while time.time() < deadline and train.poll() is None:
        s = runlib.status(port)
        if s is not None and s["state"] == "paused":
            break
        time.sleep(0.05)
    if s is None or s["state"] != "paused":
        failures.append(f"the run did not pause: {s}")
        return
    paused_at, t_paused = s["step"], time.time()
    pages = {rank: runlib.get(f"http://127.0.0.1:{port + rank}/metrics") for rank in (0, 1)}
    deadline = time.time() + DEADLINE
    while time.time() < deadline:
        step = query(prom_port, 'trident_step{job="scrape_test"}')
        if set(step) >= {"0", "1"} and all(ts > t_paused + 0.5 for ts, _ in step.values()) and \
                all(float(v) == paused_at for _, v in step.values()):
            break
        time.sleep(0.5)
    else:
        failures.append(f"no scrape of both ranks at the paused step {paused_at} after the pause: {step}")
        return
    for rank in (0, 1):
        page = pages[rank]
        for what, (name, labels) in {"loss": ("trident_loss", {}), "tokens/s": ("trident_tokens_per_second", {}),
                                     "parameter bytes": ("trident_memory_bytes", {"category": "parameter"}),
                                     "step": ("trident_step", {})}.items():
            want = scraped(page, name, dict(labels, rank=str(rank)))
            sel = ",".join([f'job="scrape_test"'] + [f'{k}="{v}"' for k, v in labels.items()])
            have = query(prom_port, f"{name}{{{sel}}}").get(str(rank))
            if have is None or not same_number(have[1], want):
                failures.append(f"rank {rank} {what}: Prometheus {have}, /metrics {want}")
    print(f"paused at step {paused_at}: Prometheus equals both ranks' /metrics")


if __name__ == "__main__":
    sys.exit(main())
