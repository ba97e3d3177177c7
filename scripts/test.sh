#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, and runs every test.
# Ends with ctest's summary line. Warnings are errors here, as in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Everything: tests, benchmarks and (when nvcc is here) the CUDA backend, whatever an earlier
# scripts/demo.sh left in the build cache (-U: TRIDENT_CUDA goes back to its detected default).
# With no GPU here to run them, the device kernels are compiled for one architecture (sm_90)
# instead of CMakeLists.txt's two: that still checks that they compile (sm_80 and sm_90 build the
# same source: every architecture branch in src/kernels/cuda is >= 800) and saves a third of nvcc's
# time in CI. With a GPU, both, as a plain build has.
cuda_architectures="80;90"
if ! nvidia-smi -L >/dev/null 2>&1; then cuda_architectures="90"; fi
scripts/build.sh -DTRIDENT_WERROR=ON -UTRIDENT_CUDA "-DCMAKE_CUDA_ARCHITECTURES=$cuda_architectures"
# GPT-2's vocabulary for the tokenizer tests (they skip, saying so, if it cannot be fetched).
if [ ! -f ../shared/data/gpt2/vocab.json ]; then
  scripts/fetch-gpt2-vocab.sh build/data/gpt2 || echo "test: could not fetch GPT-2's vocabulary; tokenizer tests will skip"
fi
# tiktoken's rank files (cl100k_base, o200k_base) for the tiktoken tests (they skip, saying so,
# without them).
if [ ! -f ../shared/data/tiktoken/cl100k_base.tiktoken ]; then
  scripts/fetch-tiktoken-ranks.sh build/data/tiktoken || echo "test: could not fetch tiktoken's rank files; tiktoken tests will skip"
fi
cd build
ctest --output-on-failure -j "$(nproc)"
