#!/bin/bash
# On a GPU machine (the device tool's run, repo root, .gpu/ carried from scripts/gpu/pack.sh):
# runs the CUDA tests, the op suite on the GPU, the attention kernels' own check, the host's
# AVX-512 AdamW, GPT-2 124M fp32 losses on the GPU against the CPU, the speed comparison with
# PyTorch, and ZeRO-Offload training a model whose optimizer state does not fit on the
# (capped) GPU; and (cpu) the host CPU's native bf16 GEMMs through oneDNN, where it has
# AVX512_BF16 or AMX (issue #4). Logs and JSON
# go to $OUT (or ./gpu-out). Usage: scripts/gpu/run.sh [tests|parity|bench|offload|cpu|all]
set -uo pipefail
what=${1:-all}
out=${OUT:-gpu-out}
mkdir -p "$out"
cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
cudart=$(python3 -c 'import nvidia.cuda_runtime, os; print(os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib"))' 2>/dev/null || true)
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
root=/tmp/trident-gpu
rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xJf .gpu/trident-gpu.tar.xz || exit 1
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${cublas}:${cudart}:${nccl}:${LD_LIBRARY_PATH:-}"
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
bin=$root/bin
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
ldd $bin/cuda_test | grep -E "not found|cublas|cudart|nccl" | tee -a "$out/gpu.txt"

if [[ $what == tests || $what == all ]]; then
  $bin/cuda_test 2>&1 | tee "$out/cuda_test.log" | tail -25
  $bin/op_suite_test --gtest_filter='*OnDevices*' --gtest_brief=1 2>&1 | tee "$out/op_suite_gpu.log" | tail -40
  $bin/attention_kernel_test 2>&1 | tee "$out/attention_kernel_test.log" | grep -E "FAIL|failures" | tail -30
  # The host-side kernels this machine's CPU runs differently (AVX-512 AdamW for ZeRO-Offload).
  $bin/ops_test --gtest_filter='AdamWOp.*:SumOfSquaresOp.*:VocabParallel*' 2>&1 | tee "$out/ops_test.log" | tail -8
fi
if [[ $what == parity || $what == all ]]; then
  # GPT-2 124M, T=1024, fp32, 20 steps from the same init and tokens: GPU vs CPU losses.
  args="--layers 12 --embd 768 --heads 12 --vocab 50257 --T 1024 --B 4 --steps 20 --warmup 0"
  $bin/train_step_bench $args --device cuda > "$out/parity_cuda.json" 2> "$out/parity_cuda.log"
  $bin/train_step_bench $args --device cpu --threads 16 > "$out/parity_cpu.json" 2> "$out/parity_cpu.log"
  python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
g, c = (json.load(open(f"{out}/parity_{d}.json"))["losses"] for d in ("cuda", "cpu"))
worst = max(abs(a - b) / abs(b) for a, b in zip(g, c))
print(json.dumps({"steps": len(g), "max_rel_diff": worst, "within_1e-3": worst <= 1e-3, "cuda": g, "cpu": c}))
PY
fi
if [[ $what == bench || $what == all ]]; then
  python3 bench/gpu_train_compare.py --trident-bench $bin/train_step_bench --sizes 124M,350M --batches 16,32 \
    > "$out/gpu_train_compare.json" 2> "$out/gpu_train_compare.log"
  tail -5 "$out/gpu_train_compare.log"
  $bin/attention_kernel_test bench 2>&1 | tee "$out/attention_bench.jsonl"
  # What cuBLASLt's GELU epilogue saves: GPT-2 124M bf16, B=16, with it (1) and without (0).
  for e in 1 0; do
    TRIDENT_CUDA_GELU_EPILOGUE=$e $bin/train_step_bench --device cuda --precision bf16 --layers 12 --embd 768 \
      --heads 12 --vocab 50257 --T 1024 --B 16 --steps 10 --warmup 3 --peak-tflops 989 \
      > "$out/gelu_epilogue_$e.json" 2> "$out/gelu_epilogue_$e.log"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('gelu epilogue', sys.argv[2], d.get('tokens_per_s'), d.get('mfu'))" \
      "$out/gelu_epilogue_$e.json" $e
  done
fi
if [[ $what == offload || $what == all ]]; then
  # ZeRO-Offload: GPT-2 1.5B (L=48, C=1600) in bf16 on a GPU capped at 16 GiB. Its fp32 AdamW
  # state and masters (12 B/param, ~19 GB) do not fit: without --offload it runs out of memory.
  args="--device cuda --precision bf16 --layers 48 --embd 1600 --heads 25 --vocab 50257 --T 1024 --B 2
        --steps 3 --warmup 1 --checkpointing full --peak-tflops 989"
  TRIDENT_CUDA_MEMORY_LIMIT_MB=16384 $bin/train_step_bench $args --offload > "$out/offload_1p5b.json" 2> "$out/offload_1p5b.log"
  tail -3 "$out/offload_1p5b.log"; cat "$out/offload_1p5b.json" | head -c 600; echo
  TRIDENT_CUDA_MEMORY_LIMIT_MB=16384 $bin/train_step_bench $args > "$out/no_offload_1p5b.json" 2> "$out/no_offload_1p5b.log"
  echo "without offload: exit $?"; tail -3 "$out/no_offload_1p5b.log"
fi
if [[ $what == cpu || $what == all ]]; then
  # The oneDNN GEMM wrapper (bf16 runs only where oneDNN reports native bf16), the op suite's
  # matmul and linear cases on the host, and GPT-2 124M on 2 cores, fp32 against bf16.
  grep -m1 "model name" /proc/cpuinfo | tee "$out/cpu.txt"
  grep -o -w -E "avx512_bf16|amx_bf16" /proc/cpuinfo | sort -u | tee -a "$out/cpu.txt"
  $bin/kernels_test 2>&1 | tee "$out/kernels_test.log" | grep -E "engine|OK|FAILED|SKIPPED|PASSED" | tail -12
  $bin/op_suite_test --gtest_filter='*matmul*:*linear*' --gtest_brief=1 2>&1 | tee "$out/op_suite_matmul.log" | tail -4
  for p in fp32 bf16; do
    OMP_NUM_THREADS=2 taskset -c 0,1 $bin/train_step_bench --layers 12 --embd 768 --heads 12 --vocab 50257 --T 1024 \
      --B 4 --steps 2 --warmup 1 --threads 2 --precision $p --sgemm > "$out/cpu_124m_$p.json" 2> "$out/cpu_124m_$p.log"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('precision','tokens_per_s','sgemm_gflops','bf16_gemm','bf16_gemm_gflops','cpu_isa')})" "$out/cpu_124m_$p.json"
  done
fi
