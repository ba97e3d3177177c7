"""Shared pieces of the end-to-end tests that drive the `trident` binary (run control,
alerts, preemption, Prometheus): a small byte-level corpus, the tiny model's flags, free
loopback ports, metrics.jsonl and /status readers.

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
    import runlib
"""
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import urllib.request


def prepare_corpus(trident, d, env):
    """Writes a repetitive text and `trident prepare`s it (byte tokenizer) into d/data."""
    text = os.path.join(d, "text.txt")
    with open(text, "w") as f:
        for i in range(3000):
            f.write(f"line {i % 37} says {'abc'[i % 3] * (1 + i % 5)} and {i % 11}.\n")
    subprocess.run([trident, "prepare", "--out", os.path.join(d, "data"), "--tokenizer", "byte", text],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def tiny_args(d, n_embd=64, seq_len=64, batch_size=4):
    """Flags of a tiny byte-level GPT-2 on the corpus of prepare_corpus(d)."""
    return [f"--model.n_layer=2", "--model.n_head=2", f"--model.n_embd={n_embd}", f"--model.block_size={seq_len}",
            "--model.vocab_size=256", "--data.tokenizer=byte", f"--data.train_file={d}/data/train.bin",
            f"--data.val_file={d}/data/val.bin", f"--data.batch_size={batch_size}", f"--data.seq_len={seq_len}",
            "--train.threads=1"]


def _free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(n=1):
    """A port p with p .. p+n-1 free now (bound and released; another process may take them, rarely)."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p + n < 65536 and all(_free(p + i) for i in range(n)):
            return p
    raise RuntimeError("no free port")


def metrics(run_dir):
    """(train losses, val losses) as the exact doubles the run wrote to metrics.jsonl."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return [], []
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["loss"] for r in rows if "loss" in r], [r["val_loss"] for r in rows if "val_loss" in r]


def rank_pids(run_dir):
    """{rank: pid} of the `trident train` ranks writing into run_dir, from /proc (their
    --train.out_dir flag and OMPI_COMM_WORLD_RANK; not `trident launch` itself)."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if b"train" in cmd and b"launch" not in cmd and f"--train.out_dir={run_dir}".encode() in cmd:
            for e in env:
                if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(e.split(b"=", 1)[1])] = int(pid)
    return found


def alerts(run_dir):
    """The events of run_dir/alerts.jsonl."""
    path = os.path.join(run_dir, "alerts.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def status(port):
    """GET /status of the run on `port` as a dict, None when nothing answers."""
    try:
        return json.loads(get(f"http://127.0.0.1:{port}/status"))
    except (OSError, ValueError):
        return None


def start_serve(trident, args, env):
    """(process, base URL) of `trident serve --port 0 ARGS`, its port read from the startup line;
    the URL is None (and the process ended) when it did not start, its stderr in process.error."""
    proc = subprocess.Popen([trident, "serve", "--port", "0"] + args, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    line = proc.stdout.readline()
    if "http://127.0.0.1:" not in line:
        proc.kill()
        proc.error = f"serve did not start: {line!r} {proc.communicate()[1][-2000:]}"
        return proc, None
    return proc, "http://127.0.0.1:" + line.split("http://127.0.0.1:")[1].split("/")[0]


def stop_serve(proc, failures):
    """SIGTERM to a `trident serve` process: it must end within 10 s, exiting 0 (or by the signal)."""
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        failures.append("serve did not stop on SIGTERM")
    if proc.returncode not in (0, -15):
        failures.append(f"serve exited {proc.returncode}: {err[-1000:]}")


class _Webhook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.server.events.append((self.headers.get("Content-Type"), self.rfile.read(n).decode()))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def start_webhook():
    """A local webhook receiver on a free loopback port, serving on a daemon thread: .url, and
    .events, the (Content-Type, body) of every POST; .shutdown() stops it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Webhook)
    server.events = []
    server.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Runs:
    """Starts `trident train` runs (one process, or `launch -n RANKS`) with the flags in
    self.args + self.layout, and collects failures; subclasses set args (and layout)."""
    timeout = 240

    def __init__(self, trident, d, env):
        self.trident, self.d, self.env, self.failures = trident, d, env, []
        self.args, self.layout = [], []

    def command(self, ranks, run, extra=()):
        cmd = ["train"] + self.args + self.layout + list(extra) + [f"--train.out_dir={run}"]
        return [self.trident] + cmd if ranks == 0 else [self.trident, "launch", "-n", str(ranks), "--"] + cmd

    def start(self, ranks, run, extra=()):
        return subprocess.Popen(self.command(ranks, run, extra), env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, errors="replace")

    def finish(self, proc, what):
        """(exit status, stderr) of proc; a run that does not end within the timeout is killed and a failure."""
        try:
            _, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            self.failures.append(f"{what}: did not end within {self.timeout} s\n{err[-3000:]}")
        return proc.returncode, err


class Cli:
    """Runs `trident` subcommands for a CLI test, collecting what went wrong in .failures."""

    def __init__(self, trident, env):
        self.trident, self.env, self.failures = trident, env, []

    def run(self, args, want_ok=True):
        """The finished process; a non-zero exit is a failure unless want_ok is False."""
        p = subprocess.run([self.trident] + args, env=self.env, capture_output=True, text=True, errors="replace")
        if want_ok and p.returncode != 0:
            self.failures.append(f"{' '.join(args[:3])}: exit {p.returncode}\n{p.stderr[-1500:]}")
        return p

    def check(self, ok, what):
        """Prints "ok" or "FAIL" and what was checked; a failure unless ok."""
        if not ok:
            self.failures.append(what)
        print(("ok   " if ok else "FAIL ") + what)

    def loss_of(self, args):
        """`eval ARGS`' val_loss, or None (a failure) when it printed no JSON."""
        p = self.run(["eval"] + args)
        try:
            return json.loads(p.stdout.strip().splitlines()[-1])["val_loss"]
        except (IndexError, ValueError, KeyError):
            self.failures.append(f"eval {args}: no JSON: {p.stdout[-500:]} {p.stderr[-500:]}")
            return None

    def refused(self, args, says):
        """A failure unless `trident ARGS` exits non-zero with `says` in its stderr."""
        p = self.run(args, want_ok=False)
        if p.returncode == 0 or says not in p.stderr:
            self.failures.append(f"{' '.join(args)}: exit {p.returncode}, wanted an error saying {says!r}: "
                                 f"{p.stderr[-800:]}")


def node_tool_missing(name, tools, package, spec):
    """The skip message (print it, exit 77) when node or the npm `package` is not in `tools`; None
    when both are there. `spec` is the tests/ folder scripts/install-npm-tool.sh installs from."""
    if shutil.which("node") is None or not os.path.isfile(os.path.join(tools, "node_modules", package, "package.json")):
        return (f"{name}: skipped: needs node and {package} in {tools}: run "
                f"scripts/install-npm-tool.sh {spec} {tools}")
    return None


def run_node_jobs(script, tools, jobs, work_dir, failures):
    """Runs a Node job script (tests/export/*/..._jobs.mjs: a JSON list of jobs in, one JSON list of
    results out) on `jobs`; when it fails, a failure and an error result per job."""
    path = os.path.join(work_dir, "jobs.json")
    with open(path, "w") as f:
        json.dump(jobs, f)
    r = subprocess.run([shutil.which("node"), script, path, "--tools", tools], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        failures.append(f"{os.path.basename(script)} exited {r.returncode}: {r.stderr[-2000:]}")
        return [{"error": "did not run"}] * len(jobs)
    return json.loads(r.stdout.strip().splitlines()[-1])


def report(name, failures):
    """Prints the failures (or "NAME: ok") and returns the exit status."""
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    if failures:
        return 1
    print(f"{name}: ok")
    return 0


def write_alerts(path, rules):
    """Writes a config file of [[alerts]] tables, one per dict of keys (strings are quoted)."""
    with open(path, "w") as f:
        for rule in rules:
            f.write("[[alerts]]\n")
            for k, v in rule.items():
                f.write(f'{k} = "{v}"\n' if isinstance(v, str) else f"{k} = {v}\n")
    return path
