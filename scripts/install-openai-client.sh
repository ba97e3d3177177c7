#!/usr/bin/env bash
# Installs OpenAI's Node client (the npm package openai, at the version that
# tests/serve/openai_client/package-lock.json pins) into DIR/node_modules, for the
# serve_openai_client test (tests/serve/openai_client_test.py), which skips, saying so, without
# it. The main job does not need it; scripts/test.sh runs this into build/tools/openai-client.
#
# Usage: scripts/install-openai-client.sh DIR
#
# Idempotent, and checked against the lock file's integrity: scripts/install-npm-tool.sh.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
here="$(dirname "$0")"
exec "$here/install-npm-tool.sh" "$here/../tests/serve/openai_client" "$1"
