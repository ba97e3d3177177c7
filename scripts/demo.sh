#!/usr/bin/env bash
# The README's main job, on a fresh Debian 12 machine: installs dependencies, builds,
# prepares a real corpus (the text of Debian's `fortunes` package) with GPT-2's tokenizer,
# trains a small GPT-2 for a few minutes with a progress bar, and prints samples.
# Extra arguments are config overrides, e.g.  scripts/demo.sh --train.steps=100
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

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

./build/apps/trident train --config configs/fortunes.toml --data.vocab_dir="$vocab" "$@"

for prompt in "Q:" "The computer" "A wise man"; do
  echo
  echo "=== sample: \"$prompt\""
  ./build/apps/trident sample --checkpoint build/runs/fortunes --prompt "$prompt" --tokens 80 \
    --temperature 0.8 --top-k 40 --seed 7
done
