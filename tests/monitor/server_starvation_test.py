#!/usr/bin/env python3
"""The monitor and control server of a running `trident train` cannot be starved (issue #47
item 4): while 32 local clients each send a request line and then one header line every 2 s
(reconnecting when dropped), GET /metrics and /status answer within 1 s (the median of 5
tries; the slowest within 3 s: generous on a loaded 2-core machine, and a starved server
misses by far more: it does not answer at all while the clients go on) and `trident ctl URL
checkpoint` succeeds; a POST without Content-Length is answered 411 within 2 s (it used to
wait 5 s for a body).

    server_starvation_test.py TRIDENT
"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TOKEN = "starvation-test-token"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import free_port, prepare_corpus, report, status, tiny_args  # noqa: E402


def trickle(port, stop):
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            i = 0
            while not stop.wait(2.0):
                s.sendall(f"X-Trickle-{i}: 1\r\n".encode())
                i += 1
        except OSError:
            time.sleep(0.05)  # dropped: come back
        finally:
            try:
                s.close()
            except (OSError, UnboundLocalError):
                pass


def timed_get(url, timeout=5):
    t = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            ok = r.status == 200
    except OSError:
        ok = False
    return ok, time.monotonic() - t


def main():
    trident = sys.argv[1]
    failures = []
    env = dict(os.environ, OMP_NUM_THREADS="1", TRIDENT_CONTROL_TOKEN=TOKEN)
    with tempfile.TemporaryDirectory() as d:
        prepare_corpus(trident, d, env)
        port = free_port()
        run = os.path.join(d, "run")
        proc = subprocess.Popen([trident, "train"] + tiny_args(d) +
                                ["--train.steps=1000000", "--train.eval_interval=1000000",
                                 "--train.checkpoint_interval=1000000", f"--train.out_dir={run}",
                                 f"--monitor.port={port}"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stop = threading.Event()
        try:
            deadline = time.time() + 120
            while time.time() < deadline and proc.poll() is None and status(port) is None:
                time.sleep(0.1)
            if status(port) is None:
                failures.append(f"the run's server never answered (exit {proc.poll()})")
                return report("server_starvation", failures)
            threads = [threading.Thread(target=trickle, args=(port, stop), daemon=True) for _ in range(32)]
            for t in threads:
                t.start()
            time.sleep(3)  # all in, and each has sent a header line or two
            took = {"metrics": [], "status": []}
            for _ in range(5):
                for path in took:
                    ok, s = timed_get(f"http://127.0.0.1:{port}/{path}")
                    took[path].append(s if ok else float("inf"))
                time.sleep(0.3)
            for path, ts in took.items():
                if statistics.median(ts) >= 1.0 or max(ts) >= 3.0:
                    failures.append(f"GET /{path} under 32 trickling clients took {['%.2f' % x for x in ts]} s "
                                    "(want median < 1 s, slowest < 3 s; inf: no answer in 5 s)")
            t = time.monotonic()
            r = subprocess.run([trident, "ctl", f"http://127.0.0.1:{port}", "checkpoint"], env=env,
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                failures.append(f"ctl checkpoint under 32 trickling clients: exit {r.returncode} after "
                                f"{time.monotonic() - t:.1f} s: {r.stdout}{r.stderr}")
            # A POST without Content-Length: 411 at once.
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            t = time.monotonic()
            s.sendall(f"POST /pause HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
            try:
                answer = s.recv(4096).decode(errors="replace")
            except OSError as e:
                answer = f"({e})"
            took411 = time.monotonic() - t
            s.close()
            if not answer.startswith("HTTP/1.1 411") or took411 >= 2.0:
                failures.append(f"POST without Content-Length: {answer.splitlines()[:1]} after {took411:.2f} s "
                                "(want 411 within 2 s)")
        finally:
            stop.set()
            proc.kill()
            proc.communicate()
    return report("server_starvation", failures)


if __name__ == "__main__":
    sys.exit(main())
