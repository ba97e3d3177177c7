#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in ./build-fuzz and runs them, a few at a time.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--corpus-only] [target...] [-- libFuzzer flags...]
#
#   --seconds N     how long each target runs (default 60)
#   --jobs J        targets run at once, one core each (default 2)
#   --corpus-only   run each target once over its corpus and stop (a regression check: seconds)
#   target...       some of the targets (default: all; `ls fuzz/*_fuzz.cc` lists them)
#   -- flags...     more libFuzzer flags for every target (e.g. -- -only_ascii=1)
#
# Each target starts from its committed seeds (fuzz/corpus/<target>/) and keeps what it finds
# in build-fuzz/corpus/<target>/. An input that crashes a target, leaks or trips ASan or UBSan
# is saved as build-fuzz/crashes/<target>/crash-<sha1> (leak-, timeout-, oom-), its log in
# build-fuzz/logs/<target>.log; rerun one with `build-fuzz/fuzz/<target> FILE`. Once it is
# fixed, copy it into fuzz/corpus/<target>/ as crash_<what> (a regression input).
# Exits 1 when any target found something, 2 for a usage error, 3 without clang's libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=2
corpus_only=0
targets=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --corpus-only) corpus_only=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "fuzz: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$seconds$jobs" in *[!0-9]*) echo "fuzz: --seconds and --jobs take whole numbers" >&2; exit 2 ;; esac
all_targets=()
for f in fuzz/*_fuzz.cc; do all_targets+=("$(basename "$f" .cc)"); done
if [ ${#targets[@]} -eq 0 ]; then targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  [ -f "fuzz/$t.cc" ] || { echo "fuzz: no target '$t' (there are: ${all_targets[*]})" >&2; exit 2; }
done

# libFuzzer comes with clang (Debian: clang, libclang-rt-*-dev; scripts/install-deps.sh).
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cc"
if ! command -v clang++ >/dev/null 2>&1 || ! clang++ -fsanitize=fuzzer "$probe/p.cc" -o "$probe/p" 2>/dev/null; then
  echo "fuzz: clang++ with libFuzzer (-fsanitize=fuzzer) is not available: run scripts/install-deps.sh" >&2
  exit 3
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DTRIDENT_FUZZ=ON -DTRIDENT_BUILD_TESTS=OFF \
  -DTRIDENT_BUILD_BENCH=OFF -DTRIDENT_CUDA=OFF ${launcher[@]+"${launcher[@]}"} >/dev/null
ninja -C build-fuzz -j "$jobs" "${targets[@]}"

mkdir -p build-fuzz/logs build-fuzz/tmp
# One target: its own scratch dir (TMPDIR: fuzz/fuzz_util.h), corpus and crash dir.
run_one() {
  local t="$1" args=(-timeout=10 -rss_limit_mb=4096 -print_final_stats=1)
  local tmp="build-fuzz/tmp/$t"
  rm -rf "$tmp"
  mkdir -p "$tmp" "build-fuzz/corpus/$t" "build-fuzz/crashes/$t"
  if [ "$corpus_only" = 1 ]; then args+=(-runs=0); else args+=(-max_total_time="$seconds"); fi
  args+=(${extra[@]+"${extra[@]}"})
  local start=$SECONDS status=0
  TMPDIR="$PWD/$tmp" build-fuzz/fuzz/"$t" "${args[@]}" -artifact_prefix="build-fuzz/crashes/$t/" \
    "build-fuzz/corpus/$t" "fuzz/corpus/$t" >"build-fuzz/logs/$t.log" 2>&1 || status=$?
  rm -rf "$tmp"
  local execs
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/logs/$t.log" | grep -o '[0-9]*$' || true)"
  if [ "$status" = 0 ]; then
    echo "fuzz: $t: ok, $((SECONDS - start)) s, ${execs:-?} inputs"
  else
    echo "fuzz: $t: FOUND SOMETHING (status $status) after $((SECONDS - start)) s: see build-fuzz/logs/$t.log and" \
         "build-fuzz/crashes/$t/"
    grep -m3 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|^fuzz: ' "build-fuzz/logs/$t.log" | sed 's/^/fuzz:   /' || true
  fi
  return "$status"
}

failed=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
if [ "$failed" = 1 ]; then
  echo "fuzz: some targets found problems (above)"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) clean"
