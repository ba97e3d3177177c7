#!/usr/bin/env bash
# Configures and builds trident in ./build (Release). Extra arguments go to cmake, e.g.
#   scripts/build.sh -DTRIDENT_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C build
