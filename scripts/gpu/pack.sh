#!/bin/bash
# Packs what a GPU machine needs to test and benchmark the CUDA backend into
# .gpu/trident-gpu.tar.xz (ignored by git; name .gpu in the device tool's carry): the GPU test binaries, the benchmark, the CLI, and the shared libraries they need
# that a CUDA image may lack (OpenBLAS, oneDNN, PCRE2, toml++, gfortran runtime); CUDA's own
# libraries come from the GPU machine. Built here, run there with scripts/gpu/run.sh, so the
# GPU's time goes to running rather than building. Usage: scripts/gpu/pack.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
cmake --build "$build" -j2 --target cuda_test op_suite_test ops_test kernels_test attention_kernel_test train_step_bench \
  plan_accuracy_bench trident
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/lib"
cp "$build"/tests/cuda_test "$build"/tests/op_suite_test "$build"/tests/ops_test "$build"/tests/kernels_test \
   "$build"/tests/attention_kernel_test \
   "$build"/bench/train_step_bench "$build"/bench/plan_accuracy_bench "$build"/apps/trident "$stage/bin/"
# TRIDENT_GPU_BASELINE=DIR: that folder's attention_kernel_test and train_step_bench (an earlier
# commit's build) go along as bin/baseline/, so run.sh's `baseline` stage times before and after
# on the same GPU in the same call.
if [ -n "${TRIDENT_GPU_BASELINE:-}" ]; then
  mkdir -p "$stage/bin/baseline"
  cp "$TRIDENT_GPU_BASELINE"/attention_kernel_test "$TRIDENT_GPU_BASELINE"/train_step_bench "$stage/bin/baseline/"
  strip "$stage"/bin/baseline/*
fi
strip "$stage"/bin/* 2>/dev/null || true
for lib in $(ldd "$stage"/bin/* 2>/dev/null | awk '/=>/ {print $3}' | sort -u); do
  case "$lib" in
    /usr/local/cuda*|*/libc.so*|*/libm.so*|*/libdl.so*|*/libpthread.so*|*/librt.so*|*/ld-linux*|*/libstdc++*|*/libgcc_s*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
# CUDA builds with CUPTI: the CUDA injection library of bench/gpu_kernel_profile.py (run.sh's
# `kernels` stage) in lib/, its CUPTI in lib/cupti/ (that script puts it on the library path of
# the traced run only, so that PyTorch's profiler keeps its own).
if cmake --build "$build" -j2 --target trident_kernel_trace > "$stage/trace-build.log" 2>&1; then
  mkdir -p "$stage/lib/cupti"
  cp "$build"/bench/libtrident_kernel_trace.so "$stage/lib/"
  cupti=$(ldd "$build"/bench/libtrident_kernel_trace.so | awk '/libcupti/ {print $3}')
  [ -n "$cupti" ] && cp -L "$cupti" "$stage/lib/cupti/"
else
  echo "pack.sh: no trident_kernel_trace in $build (a CUDA 13 build with CUPTI has it); packing without it:"
  tail -n 5 "$stage/trace-build.log"
fi
rm -f "$stage/trace-build.log"
# The device tool carries at most 64 MiB with the working tree: compressed, this is ~45 MiB
# (with a baseline's two binaries).
rm -f .gpu/trident-gpu.tar.xz
mkdir -p .gpu
tar -C "$stage" -cJf .gpu/trident-gpu.tar.xz bin lib
rm -rf "$stage"
mkdir -p .git/info && { grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude; }
# Tiny Shakespeare in GPT-2 tokens for run.sh's `trident train` on the GPU, where ../shared is not.
if [ -f ../shared/data/shakespeare.txt ] && [ ! -f .gpu/data/train.bin ]; then
  "$build"/apps/trident prepare --out .gpu/data --vocab ../shared/data/gpt2 ../shared/data/shakespeare.txt
fi
du -sh .gpu/trident-gpu.tar.xz
