#!/usr/bin/env python3
"""`trident serve` (issue #49) on a tiny byte-level GPT-2 trained here, driven over HTTP:
  - GET /v1/models and /health;
  - a greedy completion equals `trident sample --temperature 0` of the same prompt;
  - the same request streamed (server-sent events) gives the same text in pieces, its finish
    reason and [DONE], and with stream_options.include_usage the usage;
  - 8 requests at once (batched by the engine) each get what they get alone;
  - a stop string ends the text before it (finish_reason "stop"), max_tokens with "length";
  - a chat completion (the plain template) answers with an assistant message;
  - bad requests get 4xx naming the field (malformed JSON, a wrong type, an unknown model, more
    tokens than the context, a body over the limit, a missing field, an unknown path);
  - a client that goes away mid-stream frees its slot (/health's running drops to 0);
and the server is still up at the end.

    serve_cli_test.py TRIDENT
"""
import concurrent.futures
import http.client
import json
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Cli, prepare_corpus, report, start_serve, stop_serve, tiny_args  # noqa: E402


def request(port, method, path, body=None, raw=None, timeout=60):
    """(status, parsed JSON or text) of one request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def stream(port, body):
    """The parsed data: lines of a streamed request, [DONE] as the string."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/completions" if "prompt" in body else "/v1/chat/completions",
              body=json.dumps(dict(body, stream=True)).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events = []
    for line in r.read().decode().split("\n"):
        if line.startswith("data: "):
            events.append(line[6:] if line[6:] == "[DONE]" else json.loads(line[6:]))
    c.close()
    return r.status, events


def main():
    trident = sys.argv[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = Cli(trident, env)
    failures, run = cli.failures, cli.run

    def check(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="trident_serve_cli_") as d:
        prepare_corpus(trident, d, env)
        model = os.path.join(d, "model")
        run(["train"] + tiny_args(d) + ["--train.steps=20", f"--train.out_dir={model}", "--optim.lr=0.01"])
        if failures:
            return report("serve_cli", failures)
        server, base = start_serve(trident, ["--checkpoint", model, "--model-name", "tiny", "--max-batch", "4",
                                             "--threads", "1", "--max-body", "4096"], env)
        if base is None:
            return report("serve_cli", failures + [server.error])
        try:
            port = int(base.rsplit(":", 1)[1])
            status, models = request(port, "GET", "/v1/models")
            check(status == 200 and models["data"][0]["id"] == "tiny", f"/v1/models: {status} {models}")

            base = {"model": "tiny", "prompt": "line 3 says", "max_tokens": 24, "temperature": 0}
            status, plain = request(port, "POST", "/v1/completions", base)
            check(status == 200 and plain["choices"][0]["finish_reason"] == "length"
                  and plain["usage"] == {"prompt_tokens": 11, "completion_tokens": 24, "total_tokens": 35},
                  f"completion: {status} {plain}")
            text = plain["choices"][0]["text"]
            sample = run(["sample", "--checkpoint", model, "--prompt", "line 3 says", "--tokens", "24",
                          "--temperature", "0"]).stdout
            check(sample == "line 3 says" + text + "\n", f"sample gives {sample!r}, the server {text!r}")

            status, events = stream(port, dict(base, stream_options={"include_usage": True}))
            pieces = "".join(e["choices"][0]["text"] for e in events if isinstance(e, dict) and e["choices"])
            check(status == 200 and pieces == text and events[-1] == "[DONE]"
                  and events[-2]["usage"]["completion_tokens"] == 24
                  and events[-3]["choices"][0]["finish_reason"] == "length",
                  f"stream: {status} {pieces!r} vs {text!r}; last events {events[-3:]}")

            prompts = [f"line {i} says" for i in range(8)]
            alone = [request(port, "POST", "/v1/completions", dict(base, prompt=p))[1]["choices"][0]["text"]
                     for p in prompts]
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                together = list(pool.map(lambda p: request(port, "POST", "/v1/completions",
                                                           dict(base, prompt=p))[1]["choices"][0]["text"], prompts))
            check(together == alone, f"8 at once differ from alone: {together} vs {alone}")

            stop = text[5:8]
            status, stopped = request(port, "POST", "/v1/completions", dict(base, stop=[stop]))
            check(status == 200 and stopped["choices"][0]["finish_reason"] == "stop"
                  and stopped["choices"][0]["text"] == text[:text.find(stop)],
                  f"stop {stop!r}: {stopped}")

            status, chat = request(port, "POST", "/v1/chat/completions",
                                   {"model": "tiny", "messages": [{"role": "user", "content": "line 1"}],
                                    "max_tokens": 8, "temperature": 0})
            check(status == 200 and chat["choices"][0]["message"]["role"] == "assistant"
                  and chat["object"] == "chat.completion", f"chat: {status} {chat}")

            def refused(body, want_status, says, path="/v1/completions", raw=None):
                status, answer = request(port, "POST", path, body, raw=raw)
                message = answer["error"]["message"] if isinstance(answer, dict) and "error" in answer else str(answer)
                check(status == want_status and says in message, f"{body or raw!r}: {status} {answer}")

            refused(None, 400, "not valid JSON", raw=b"{not json")
            refused(dict(base, temperature="hot"), 400, "'temperature' is a string, not a number")
            refused(dict(base, model="gpt-9"), 404, "the model 'gpt-9' does not exist")
            refused(dict(base, max_tokens=100000), 400, "leaving room for")
            refused({"model": "tiny"}, 400, "'prompt' is required")
            refused(None, 413, "larger than the server accepts", raw=json.dumps(dict(base, prompt="x" * 5000)).encode())
            refused(base, 404, "no such endpoint", path="/v1/nothing")

            # A streaming client that goes away: its slot is free soon after.
            s = socket.create_connection(("127.0.0.1", port))
            body = json.dumps(dict(base, max_tokens=50, stream=True, temperature=1.0))
            s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            s.recv(100)
            s.close()
            for _ in range(100):
                status, health = request(port, "GET", "/health")
                if health.get("running") == 0 and health.get("queued") == 0:
                    break
                time.sleep(0.05)
            check(health.get("running") == 0, f"a gone client's request still runs: {health}")
            status, health = request(port, "GET", "/health")
            check(status == 200 and health["status"] == "ok", f"the server is not up at the end: {status} {health}")
            status, metrics = request(port, "GET", "/metrics")
            check(status == 200 and 'trident_serve_requests_total{endpoint="completions"}' in metrics
                  and "trident_serve_time_to_first_token_seconds_count" in metrics
                  and "trident_serve_refused_total 7" in metrics, f"/metrics: {status} {str(metrics)[:1500]}")
        finally:
            stop_serve(server, failures)
        # With an API key, a request without it is refused (401), with it served.
        keyed, base = start_serve(trident, ["--checkpoint", model, "--threads", "1"], dict(env, TRIDENT_API_KEY="sesame"))
        if base is None:
            return report("serve_cli", failures + [keyed.error])
        try:
            port = int(base.rsplit(":", 1)[1])
            body = json.dumps({"model": "model", "prompt": "line", "max_tokens": 2}).encode()
            for headers, want in (({}, 401), ({"Authorization": "Bearer nope"}, 401),
                                  ({"Authorization": "Bearer sesame"}, 200)):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("POST", "/v1/completions", body=body, headers=dict(headers, **{"Content-Type": "application/json"}))
                r = c.getresponse()
                answer = r.read().decode()
                check(r.status == want, f"api key {headers}: {r.status} {answer}")
        finally:
            stop_serve(keyed, failures)
    return report("serve_cli", failures)


if __name__ == "__main__":
    sys.exit(main())
