#!/usr/bin/env bash
# The README's main job, on a fresh Debian 12 machine: installs what the `trident` binary
# needs (no Python, PyTorch or test frameworks: scripts/test.sh installs those), builds that
# binary alone (no tests, benchmarks or CUDA backend), prepares a real corpus (the text of
# Debian's `fortunes` package) with GPT-2's tokenizer, trains a small GPT-2 for a few minutes
# on the CPU with a progress bar, prints samples, and says how long each step took.
# Extra arguments are config overrides, e.g.  scripts/demo.sh --train.steps=100
set -euo pipefail
cd "$(dirname "$0")/.."

timings=()
phase_start=$SECONDS
phase_done() {
  timings+=("$1 $((SECONDS - phase_start)) s")
  echo "demo: $1 took $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

scripts/install-deps.sh --main
phase_done install
# The CPU binary only: the CUDA backend (when nvcc is here) and the tests come with
# scripts/build.sh or scripts/test.sh.
scripts/build.sh --target trident_cli -DTRIDENT_BUILD_TESTS=OFF -DTRIDENT_BUILD_BENCH=OFF -DTRIDENT_CUDA=OFF
phase_done build

vocab=build/data/gpt2
if [ -f ../shared/data/gpt2/vocab.json ]; then
  vocab=../shared/data/gpt2
else
  scripts/fetch-gpt2-vocab.sh "$vocab"
fi
corpus=()
for f in /usr/share/games/fortunes/*; do
  case "$f" in *.dat|*.u8) continue ;; esac
  [ -f "$f" ] && corpus+=("$f")
done
./build/apps/trident prepare --out build/data/fortunes --vocab "$vocab" --val-fraction 0.05 "${corpus[@]}"
phase_done data

./build/apps/trident train --config configs/fortunes.toml --data.vocab_dir="$vocab" "$@"
phase_done training

for prompt in "Q:" "The computer" "A wise man"; do
  echo
  echo "=== sample: \"$prompt\""
  ./build/apps/trident sample --checkpoint build/runs/fortunes --prompt "$prompt" --tokens 80 \
    --temperature 0.8 --top-k 40 --seed 7
done
phase_done samples
echo
echo "demo: done in $SECONDS s (${timings[*]/%/;})"
