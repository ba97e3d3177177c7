#!/usr/bin/env python3
"""The plateau alert end to end (issue #23): a run whose loss cannot improve (lr 1e-9, so
no evaluation beats the first by min_delta) fires its [[alerts]] plateau rule at exactly the
4th evaluation (the 3rd in a row without improvement, Note [Plateau counting]); a local
webhook receiver gets exactly one JSON event naming the rule, step and values; a local SMTP
server on loopback (a few lines of the protocol, below) receives exactly one e-mail saying
the same; a checkpoint is written at that step; the run pauses; `trident ctl URL resume`
continues it; and the whole run's losses equal an uninterrupted run's bit for bit.

    alerts_test.py TRIDENT
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

TIMEOUT = 240
TOKEN = "alert-test-token"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import free_port, metrics, prepare_corpus, report, start_webhook, status  # noqa: E402


class Smtp:
    """A minimal SMTP receiver: greets, says 250 to EHLO/HELO/MAIL/RCPT, 354 to DATA, keeps
    the message up to the lone '.', 221 to QUIT. Every socket has a timeout."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(1)
        self.port = self.sock.getsockname()[1]
        self.messages, self.stop = [], False
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(10)
            try:
                self.session(conn)
            except OSError:
                pass
            finally:
                conn.close()

    def session(self, conn):
        f = conn.makefile("rb")
        conn.sendall(b"220 localhost test SMTP\r\n")
        while True:
            line = f.readline().decode().rstrip("\r\n")
            if not line:
                return
            verb = line.split(" ")[0].upper()
            if verb == "DATA":
                conn.sendall(b"354 end with .\r\n")
                data = []
                while True:
                    l = f.readline().decode()
                    if l in (".\r\n", ".\n", ""):
                        break
                    data.append(l)
                self.messages.append("".join(data))
                conn.sendall(b"250 queued\r\n")
            elif verb == "QUIT":
                conn.sendall(b"221 bye\r\n")
                return
            else:
                conn.sendall(b"250 ok\r\n")


def main():
    trident = sys.argv[1]
    failures = []
    env = dict(os.environ, OMP_NUM_THREADS="1", TRIDENT_CONTROL_TOKEN=TOKEN)
    with tempfile.TemporaryDirectory() as d:
        prepare_corpus(trident, d, env)
        hook = start_webhook()
        smtp = Smtp()
        config = os.path.join(d, "alerts.toml")
        with open(config, "w") as f:
            f.write(f"""
[[alerts]]
name = "plateau"
condition = "plateau"
metric = "val_loss"
patience = 3
min_delta = 0.01
actions = "log,notify,checkpoint,pause"
webhook = "{hook.url}"
smtp_url = "smtp://127.0.0.1:{smtp.port}"
email_from = "trident@localhost"
email_to = "oncall@localhost"
""")
        args = ["--model.n_layer=2", "--model.n_head=2", "--model.n_embd=64", "--model.block_size=64",
                "--model.vocab_size=256", "--data.tokenizer=byte", f"--data.train_file={d}/data/train.bin",
                f"--data.val_file={d}/data/val.bin", "--data.batch_size=4", "--data.seq_len=64",
                "--optim.lr=1e-9", "--lr_schedule.min_lr=0", "--train.steps=30", "--train.eval_interval=5",
                "--train.eval_batches=2", "--train.threads=1"]
        ref_dir = os.path.join(d, "reference")
        no_alerts = os.path.join(d, "no_alerts.toml")
        with open(no_alerts, "w") as f:
            f.write("alerts = []\n")
        ref = subprocess.run([trident, "train", "--config", no_alerts] + args + [f"--train.out_dir={ref_dir}"],
                             env=env, capture_output=True, text=True, timeout=TIMEOUT)
        if ref.returncode != 0:
            failures.append(f"reference: exit {ref.returncode}\n{ref.stderr[-3000:]}")
        run = os.path.join(d, "run")
        port = free_port()
        proc = subprocess.Popen([trident, "train", "--config", config] + args +
                                [f"--train.out_dir={run}", f"--monitor.port={port}"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline, s = time.time() + TIMEOUT, None
        while time.time() < deadline and proc.poll() is None:
            s = status(port)
            if s is not None and s["state"] == "paused":
                break
            time.sleep(0.02)
        if s is None or s["state"] != "paused":
            failures.append(f"the run did not pause: status {s}, exit {proc.poll()}")
        else:
            if s["step"] != 20:
                failures.append(f"paused at step {s['step']}, not 20 (the 4th evaluation)")
            if "plateau" not in s["reason"]:
                failures.append(f"/status reason does not name the rule: {s}")
            if not os.path.exists(os.path.join(run, "step_000020", "DONE")):
                failures.append("no checkpoint step_000020 when the alert fired")
            time.sleep(1)  # nothing more arrives while paused
            if len(hook.events) != 1:
                failures.append(f"webhook got {len(hook.events)} events, not 1: {hook.events}")
            else:
                ctype, body = hook.events[0]
                e = json.loads(body)
                if ctype != "application/json" or e["rule"] != "plateau" or e["step"] != 20 or \
                        e["evaluations"] != 3 or e["best_step"] != 5 or not isinstance(e["value"], float):
                    failures.append(f"webhook event: {ctype} {e}")
            if len(smtp.messages) != 1:
                failures.append(f"SMTP got {len(smtp.messages)} messages, not 1")
            elif "plateau" not in smtp.messages[0] or "step 20" not in smtp.messages[0] or \
                    "oncall@localhost" not in smtp.messages[0]:
                failures.append(f"e-mail does not name the rule, step, recipient:\n{smtp.messages[0]}")
            r = subprocess.run([trident, "ctl", f"http://127.0.0.1:{port}", "resume"], env=env,
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                failures.append(f"ctl resume: exit {r.returncode}: {r.stdout}{r.stderr}")
        try:
            _, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            failures.append("the run did not finish after resume")
        if proc.returncode != 0:
            failures.append(f"alerted run: exit {proc.returncode}\n{err[-3000:]}")
        if "alert 'plateau' (plateau) at step 20" not in err:
            failures.append(f"no log line for the alert:\n{err[-2000:]}")
        if len(hook.events) != 1 or len(smtp.messages) != 1:
            failures.append(f"after the run: {len(hook.events)} webhook events, {len(smtp.messages)} e-mails (want 1, 1)")
        if ref.returncode == 0 and proc.returncode == 0:
            got, want = metrics(run)[0], metrics(ref_dir)[0]
            if got != want:
                failures.append(f"losses differ from the uninterrupted run:\n{got}\nvs\n{want}")
            if metrics(run)[1] != metrics(ref_dir)[1] or len(metrics(run)[1]) != 6:
                failures.append(f"val losses {metrics(run)[1]} vs the reference's {metrics(ref_dir)[1]}")
        smtp.stop = True
        hook.shutdown()
    return report("alerts", failures)


if __name__ == "__main__":
    sys.exit(main())
