#!/usr/bin/env bash
# Installs the npm packages a test or benchmark drives (OpenAI's client, llama.cpp through
# node-llama-cpp, ONNX Runtime through onnxruntime-node) into DIR/node_modules, exactly as
# SPEC_DIR/package-lock.json pins them: `npm ci` installs the lock file's tree, checked against
# its sha512 integrity. Optional dependencies are left out (--omit=optional): node-llama-cpp's
# CUDA and Vulkan builds, 650 MB that the CPU tests never load; a spec lists the platform
# package it needs as a plain dependency.
#
# Usage: scripts/install-npm-tool.sh SPEC_DIR DIR
#
# Idempotent: when DIR already holds SPEC_DIR's lock file and every dependency of its
# package.json at the pinned version, it does nothing (and needs no network).
# Needs: npm and node.
set -euo pipefail

SCRIPT=install-npm-tool
if [ $# -ne 2 ]; then
  echo "usage: $0 SPEC_DIR DIR" >&2
  exit 2
fi
spec="$(cd "$1" && pwd)"
dir="$2"
[ -f "$spec/package.json" ] && [ -f "$spec/package-lock.json" ] ||
  { echo "$SCRIPT: $spec has no package.json and package-lock.json" >&2; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "$SCRIPT: needs npm and node" >&2; exit 1; }

# Every dependency of the spec's package.json, as name@version.
pinned="$(node -e 'const p = require(process.argv[1]); for (const [n, v] of Object.entries(p.dependencies || {})) console.log(`${n}@${v}`)' "$spec/package.json")"

installed() {
  cmp -s "$spec/package-lock.json" "$dir/package-lock.json" || return 1
  node -e '
    const fs = require("fs"), path = require("path");
    const [dir, ...pins] = process.argv.slice(1);
    for (const pin of pins) {
      const at = pin.lastIndexOf("@"), name = pin.slice(0, at), want = pin.slice(at + 1);
      const file = path.join(dir, "node_modules", name, "package.json");
      if (!fs.existsSync(file) || JSON.parse(fs.readFileSync(file, "utf8")).version !== want) process.exit(1);
    }' "$dir" $pinned
}

if installed; then
  echo "$SCRIPT: $dir already holds" $pinned
  exit 0
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
cp "$spec/package.json" "$spec/package-lock.json" "$dir/"
echo "$SCRIPT: installing" $pinned "from the npm registry into $dir"
# onnxruntime-node's install script would download a CUDA provider; its CPU binaries ship in the package.
export ONNXRUNTIME_NODE_INSTALL=skip
if ! (cd "$dir" && npm ci --omit=optional --no-audit --no-fund >"$dir/npm.log" 2>&1); then
  echo "$SCRIPT: npm ci failed:" >&2
  tail -n 20 "$dir/npm.log" >&2
  exit 1
fi
installed || { echo "$SCRIPT: npm ci did not leave" $pinned "in $dir" >&2; exit 1; }
echo "$SCRIPT: installed" $pinned "into $dir"
