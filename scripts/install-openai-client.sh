#!/usr/bin/env bash
# Installs OpenAI's Node client (the npm package openai, at the version that
# tests/serve/openai_client/package-lock.json pins) into DIR/node_modules, for the
# serve_openai_client test (tests/serve/openai_client_test.py), which skips, saying so, without
# it. The main job does not need it; scripts/test.sh runs this into build/tools/openai-client.
#
# Usage: scripts/install-openai-client.sh DIR
#
# Idempotent: when DIR already holds the pinned version it does nothing (and needs no network).
# `npm ci` installs exactly the lock file's tree, checked against its sha512 integrity.
# Needs: npm (and node).
set -euo pipefail

SCRIPT=install-openai-client
source "$(dirname "$0")/lib/npm-fetch.sh"
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir="$1"
spec="$(cd "$(dirname "$0")/../tests/serve/openai_client" && pwd)"
want="$(sed -n 's/^ *"openai": "\([0-9.]*\)".*/\1/p' "$spec/package.json")"
[ -n "$want" ] || { echo "$SCRIPT: no pinned openai version in $spec/package.json" >&2; exit 1; }

installed() {
  [ -f "$dir/node_modules/openai/package.json" ] &&
    grep -q "\"version\": \"$want\"" "$dir/node_modules/openai/package.json" &&
    cmp -s "$spec/package-lock.json" "$dir/package-lock.json"
}

if installed; then
  echo "$SCRIPT: $dir already holds openai $want"
  exit 0
fi
require_tools npm node
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
cp "$spec/package.json" "$spec/package-lock.json" "$dir/"
echo "$SCRIPT: installing openai $want from the npm registry into $dir"
if ! (cd "$dir" && npm ci --no-audit --no-fund >"$dir/npm.log" 2>&1); then
  echo "$SCRIPT: npm ci failed:" >&2
  tail -n 20 "$dir/npm.log" >&2
  exit 1
fi
installed || { echo "$SCRIPT: npm ci did not leave openai $want in $dir" >&2; exit 1; }
echo "$SCRIPT: installed openai $want into $dir"
