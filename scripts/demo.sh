#!/usr/bin/env bash
# The README's main job: installs dependencies, builds, and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/apps/trident demo "$@"
