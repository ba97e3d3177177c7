#!/usr/bin/env bash
# Fetches OpenAI's tiktoken rank files, cl100k_base.tiktoken and o200k_base.tiktoken, into DIR
# from the npm registry. The package tiktoken ships each encoding as encoders/NAME.json with
# the ranks in a compressed form ("! OFFSET TOKEN TOKEN ...": base64 tokens with consecutive
# ranks from OFFSET); this script writes them back in the standard format, one
# "base64(token bytes) rank" line per token in rank order, which trident reads (as it reads
# Llama 3's tokenizer.model, the same format).
#
# Usage: scripts/fetch-tiktoken-ranks.sh DIR
#
# Idempotent: when DIR already holds both files with the right contents it does nothing (and
# needs no network). The files written are checked against the sha256 values that tiktoken
# (tiktoken_ext/openai_public.py) pins for the files it downloads from OpenAI, so they are
# byte for byte those files: about 1.7 MB and 3.6 MB (too large to commit).
# Needs: npm (and node), tar, sha256sum.
set -euo pipefail

PACKAGE="tiktoken@1.0.22"
CL100K_SHA256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
O200K_SHA256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

SCRIPT=fetch-tiktoken-ranks
source "$(dirname "$0")/lib/npm-fetch.sh"
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir="$1"

# True when directory $1 holds both files with the pinned hashes.
verified() {
  files_verified "$1" cl100k_base.tiktoken "$CL100K_SHA256" o200k_base.tiktoken "$O200K_SHA256"
}

if verified "$dir"; then
  echo "fetch-tiktoken-ranks: $dir already holds cl100k_base.tiktoken and o200k_base.tiktoken"
  exit 0
fi
require_tools npm node tar sha256sum

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
npm_pack_into "$tmp" "$PACKAGE"
tar -xzf "$tmp"/tiktoken-*.tgz -C "$tmp" package/encoders/cl100k_base.json package/encoders/o200k_base.json
node -e '
  const fs = require("fs");
  const [from, to] = process.argv.slice(1);
  for (const name of ["cl100k_base", "o200k_base"]) {
    const encoder = JSON.parse(fs.readFileSync(`${from}/${name}.json`, "utf8"));
    const ranks = [];
    for (const line of encoder.bpe_ranks.split("\n").filter(Boolean)) {
      const [, offset, ...tokens] = line.split(" ");
      tokens.forEach((token, i) => ranks.push([token, Number.parseInt(offset, 10) + i]));
    }
    ranks.sort((a, b) => a[1] - b[1]);
    fs.writeFileSync(`${to}/${name}.tiktoken`, ranks.map(([t, r]) => `${t} ${r}\n`).join(""));
  }
' "$tmp/package/encoders" "$tmp"
if ! verified "$tmp"; then
  echo "fetch-tiktoken-ranks: the files made from $PACKAGE do not have the sha256 that tiktoken pins" >&2
  sha256sum "$tmp/cl100k_base.tiktoken" "$tmp/o200k_base.tiktoken" >&2
  exit 1
fi

install_files "$tmp" "$dir" cl100k_base.tiktoken o200k_base.tiktoken
echo "fetch-tiktoken-ranks: wrote $dir/cl100k_base.tiktoken and $dir/o200k_base.tiktoken"
