#!/usr/bin/env python3
"""`trident serve` driven by OpenAI's Node client (issue #49): trains a tiny byte-level GPT-2
(context 1024, so that a whole-context stream is still generating when its client aborts it),
starts `trident serve --max-batch 8` on it, and runs tests/serve/openai_client_test.mjs (what it
checks is listed there) against it with the npm package openai installed in CLIENT_DIR
(scripts/install-openai-client.sh CLIENT_DIR). Then the server must still be up, and stop on
SIGTERM. Skips (77), saying so, without node or the package.

    openai_client_test.py TRIDENT CLIENT_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from runlib import Cli, prepare_corpus, report, start_serve, stop_serve, tiny_args  # noqa: E402

CONTEXT = 1024
MAX_BODY = 4096


def main():
    trident, client_dir = sys.argv[1], sys.argv[2]
    node = shutil.which("node")
    if node is None:
        print("serve_openai_client: SKIP: no node on PATH (Debian: apt-get install nodejs)")
        return 77
    if not os.path.isfile(os.path.join(client_dir, "node_modules", "openai", "package.json")):
        print(f"serve_openai_client: SKIP: the npm package openai is not in {client_dir}: "
              f"run scripts/install-openai-client.sh {client_dir}")
        return 77
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = Cli(trident, env)
    failures, run = cli.failures, cli.run
    with tempfile.TemporaryDirectory(prefix="trident_serve_openai_") as d:
        prepare_corpus(trident, d, env)
        model = os.path.join(d, "model")
        # 150 steps: greedy text that differs between prompts (20 give spaces alone).
        run(["train"] + tiny_args(d, seq_len=CONTEXT, batch_size=1)
            + ["--train.steps=150", f"--train.out_dir={model}", "--optim.lr=0.003"])
        if failures:
            return report("serve_openai_client", failures)
        server, base = start_serve(trident, ["--checkpoint", model, "--model-name", "tiny", "--max-batch", "8",
                                             "--threads", "1", "--max-body", str(MAX_BODY)], env)
        if base is None:
            return report("serve_openai_client", failures + [server.error])
        try:
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_client_test.mjs")
            r = subprocess.run([node, script, "--base", base, "--model", "tiny", "--client", client_dir,
                                "--max-body", str(MAX_BODY), "--context", str(CONTEXT)],
                               capture_output=True, text=True, timeout=240)
            print(r.stdout, end="")
            if r.returncode != 0:
                failures.append(f"openai_client_test.mjs exited {r.returncode}: {r.stderr[-3000:]}")
            with urllib.request.urlopen(base + "/health", timeout=30) as h:
                if h.status != 200:
                    failures.append(f"the server is not up at the end: /health {h.status}")
        finally:
            stop_serve(server, failures)
    return report("serve_openai_client", failures)


if __name__ == "__main__":
    sys.exit(main())
