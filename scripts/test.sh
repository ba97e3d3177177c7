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
# OpenAI's Node client (npm openai, pinned) for the serve_openai_client test (it skips, saying
# so, without it).
scripts/install-openai-client.sh build/tools/openai-client || echo "test: could not install the npm package openai; serve_openai_client will skip"
# llama.cpp through node-llama-cpp (pinned, its prebuilt CPU binaries) for the GGUF export test
# (it skips, saying so, without it).
scripts/install-npm-tool.sh tests/export/llama_cpp build/tools/llama-cpp || echo "test: could not install node-llama-cpp; gguf_llama_cpp will skip"
# ONNX Runtime through onnxruntime-node (pinned, its CPU binaries) for the ONNX export test (it
# skips, saying so, without it).
scripts/install-npm-tool.sh tests/export/onnxruntime build/tools/onnxruntime || echo "test: could not install onnxruntime-node; onnx_runtime will skip"
# The fuzz targets (fuzz/), built with clang in build-fuzz and run 5 s each, all at once: a short
# check that the parsers still take their corpus and thousands of mutations of it without a crash
# or sanitizer report. Only those below the training stack, whose build is about a quarter of
# trident's; config_toml_fuzz, hf_config_fuzz and hf_index_fuzz link all of it (models, kernels,
# parallel): scripts/fuzz.sh runs them, and every target longer. Skipped, saying so, without clang.
fuzz_status=0
scripts/fuzz.sh --seconds 5 --jobs "$(nproc)" safetensors_fuzz manifest_fuzz token_file_fuzz tiktoken_ranks_fuzz \
  hf_tokenizer_json_fuzz gpt2_vocab_fuzz http_request_fuzz instruction_jsonl_fuzz || fuzz_status=$?
if [ "$fuzz_status" = 3 ]; then
  echo "test: skipping the fuzz targets: no clang with libFuzzer here"
elif [ "$fuzz_status" != 0 ]; then
  exit "$fuzz_status"
fi
cd build
# Tests run side by side (-j), each with every core's worth of OpenMP threads: spinning idle
# threads (libgomp's default) then hold the cores the other test's threads wait for, and a
# parallel region can cost a scheduler time slice. Measured on 2 cores: a KV-cache test took
# 29.7 s beside the others and 0.1 s alone; sleeping idle threads avoid that.
export OMP_WAIT_POLICY=PASSIVE
ctest --output-on-failure -j "$(nproc)"
