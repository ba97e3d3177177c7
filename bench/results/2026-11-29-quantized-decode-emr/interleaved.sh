#!/bin/sh
# Trident's decode tokens/s with fp32, int8 and int4 weights, run in turn (none, int8, int4) for
# ROUNDS rounds, so that the shared machine's load changes hit every scheme alike; one JSON line
# per run. The ratios are taken within each round (int8 / none of the same round).
#   interleaved.sh DECODE_BENCH B ROUNDS [extra decode_bench flags]
bench=$1 B=$2 rounds=$3
shift 3
for r in $(seq 1 "$rounds"); do
  for s in none int8 int4; do
    OMP_WAIT_POLICY=PASSIVE "$bench" --B "$B" --threads 2 --scheme "$s" "$@" |
      python3 -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'round': $r, 'B': d['B'], 'scheme': d['scheme'], 'decode_tokens_per_s': d['decode_tokens_per_s'], 'ttft_ms': d['ttft_ms'], 'weight_bytes': d['weight_bytes']}))"
  done
done
