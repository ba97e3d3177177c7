#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, and runs every test.
# Ends with ctest's summary line. Warnings are errors here, as in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DTRIDENT_WERROR=ON
cd build
ctest --output-on-failure -j "$(nproc)"
