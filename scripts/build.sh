#!/usr/bin/env bash
# Configures and builds trident in ./build (Release): everything, tests and benchmarks
# included, unless told otherwise. Arguments go to cmake, except `--target T` (repeatable),
# which builds only T and what it links, e.g.
#   scripts/build.sh -DTRIDENT_SANITIZE=ON
#   scripts/build.sh --target trident_cli -DTRIDENT_BUILD_TESTS=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
cmake_args=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target)
      [ $# -ge 2 ] || { echo "build: --target needs a target name" >&2; exit 2; }
      targets+=("$2")
      shift 2
      ;;
    --target=*) targets+=("${1#--target=}"); shift ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done
# Tests and benchmarks on unless an argument says otherwise (scripts/demo.sh turns them off):
# a later -D wins over an earlier one.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIDENT_BUILD_TESTS=ON -DTRIDENT_BUILD_BENCH=ON \
  ${cmake_args[@]+"${cmake_args[@]}"} >/dev/null
ninja -C build ${targets[@]+"${targets[@]}"}
