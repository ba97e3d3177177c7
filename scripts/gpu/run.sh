#!/bin/bash
# On a GPU machine (the device tool's run, repo root, .gpu/ carried from scripts/gpu/pack.sh):
# runs the CUDA tests, compute-sanitizer on the attention kernels, GPT-2 124M fp32 and bf16
# losses on the GPU (compared with the CPU's here, off the GPU's time: scripts/gpu/parity.py),
# `trident train` on the GPU on the packed corpus, a per-op profile of a bf16 step and PyTorch's
# rates at the same shapes (bench/gpu_ceilings.py), the speed comparison with PyTorch, ZeRO-Offload
# training a model whose optimizer state does not fit on the (capped) GPU, (kernels) a bf16 step's
# GPU time kernel by kernel against PyTorch's, and (cpu) the host CPU's native bf16 GEMMs. Device
# time is short, so every stage has a time limit and the whole run a deadline
# (TRIDENT_GPU_DEADLINE seconds, default 540): a stage that would start past it is skipped and
# says so. Logs and JSON go to one directory, packed as $OUT/gpu-results.tar.gz
# (the device tool brings back few files). Usage:
#   scripts/gpu/run.sh [all | STAGE...]   STAGE: tests gate sanitize parity train profile kernels ncu_attention baseline
#   variants bench llama offload planner cpu,
#   run in the order given (all: tests parity profile bench llama offload train sanitize).
set -uo pipefail
stages=${*:-all}
out=${OUT:-gpu-out}
res=/tmp/gpu-results
rm -rf "$res" && mkdir -p "$res" "$out"
deadline=${TRIDENT_GPU_DEADLINE:-540}
start=$SECONDS
cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
cudart=$(python3 -c 'import nvidia.cuda_runtime, os; print(os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib"))' 2>/dev/null || true)
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
root=/tmp/trident-gpu
rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xJf .gpu/trident-gpu.tar.xz || exit 1
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${cublas}:${cudart}:${nccl}:${LD_LIBRARY_PATH:-}"
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
bin=$root/bin
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; grep -m1 "model name" /proc/cpuinfo; nproc
  git rev-parse HEAD 2>/dev/null; date -u; ldd $bin/cuda_test | grep -E "not found|cublas|cudart|nccl"; } 2>&1 | tee "$res/machine.txt"

# stage NAME SECONDS CMD...: runs CMD with its output in $res/NAME.log, unless the deadline
# would pass; prints one status line and the log's last lines.
stage() {
  local name=$1 limit=$2; shift 2
  local left=$((deadline - (SECONDS - start)))
  if ((left < 15)); then echo "== $name: skipped, ${left}s left of the deadline" | tee -a "$res/status.txt"; return; fi
  ((limit > left)) && limit=$left
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$res/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0))s (limit ${limit}s)" | tee -a "$res/status.txt"
  tail -n "${TAIL:-6}" "$res/$name.log" | cut -c1-220
}

gpt2_124m="--layers 12 --embd 768 --heads 12 --vocab 50257 --T 1024"

group_tests() {
  stage cuda_test 120 $bin/cuda_test
  TAIL=12 stage op_suite_gpu 150 $bin/op_suite_test --gtest_filter='*OnDevices*' --gtest_brief=1
  TAIL=3 stage attention_kernel_test 120 $bin/attention_kernel_test
  grep FAIL "$res/attention_kernel_test.log" | head -20
  stage ops_host 60 $bin/ops_test --gtest_filter='AdamWOp.*:SumOfSquaresOp.*:VocabParallel*'
}
group_sanitize() {
  command -v compute-sanitizer >/dev/null || { echo "== sanitize: no compute-sanitizer"; return; }
  TAIL=4 stage memcheck_attention 90 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/attention_kernel_test quick
  # RACECHECK=0 skips racecheck (a minute) when the attention kernels have not changed.
  [ "${RACECHECK:-1}" = 1 ] && TAIL=4 stage racecheck_attention 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
    $bin/attention_kernel_test quick
  TAIL=4 stage memcheck_reductions 90 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/op_suite_test \
    --gtest_filter='*OnDevices*sum*:*OnDevices*mean*:*OnDevices*softmax*:*OnDevices*cross_entropy*:*OnDevices*layer_norm*' --gtest_brief=1
}
group_parity() {
  # GPT-2 124M, T=1024, B=4 from the same init and tokens as the CPU runs in .gpu/parity_cpu_*.json.
  TAIL=2 stage parity_cuda_fp32 90 $bin/train_step_bench $gpt2_124m --B 4 --steps 20 --warmup 0 --device cuda --precision fp32
  TAIL=2 stage parity_cuda_bf16 90 $bin/train_step_bench $gpt2_124m --B 4 --steps 20 --warmup 0 --device cuda --precision bf16
}
group_train() {
  [ -d .gpu/data ] || { echo "== train: no .gpu/data (scripts/gpu/pack.sh prepares it)"; return; }
  # `trident train` on the GPU: GPT-2 124M on Tiny Shakespeare (T=1024, B=8), 200 steps, bf16 and fp32.
  for p in ${TRAIN_PRECISIONS:-bf16 fp32}; do
    TAIL=4 stage train_$p 120 $bin/trident train --config configs/shakespeare.toml --train.device=cuda \
      --precision.dtype=$p --model.n_layer=12 --model.n_head=12 --model.n_embd=768 --model.block_size=1024 \
      --data.seq_len=1024 --data.batch_size=8 --data.train_file=.gpu/data/train.bin --data.val_file=.gpu/data/val.bin \
      --train.steps=200 --train.eval_interval=50 --train.eval_batches=10 --train.checkpoint_interval=0 \
      --train.out_dir=/tmp/run_$p --train.resume=false --train.log_interval=10 --lr_schedule.warmup_steps=20 --optim.lr=6e-4
    cp /tmp/run_$p/metrics.jsonl "$res/train_${p}_metrics.jsonl" 2>/dev/null
  done
}
group_profile() {
  # Where a bf16 step's GPU time goes (the profiled step synchronizes at every scope), with the
  # GEMMs on cuBLASLt and on cublasGemmEx; and what PyTorch reaches at the same shapes.
  TAIL=45 stage profile_124m_bf16 90 $bin/train_step_bench $gpt2_124m --B 16 --steps 3 --warmup 2 --device cuda \
    --precision bf16 --peak-tflops 989 --profile
  TRIDENT_CUDA_CUBLASLT=0 TAIL=30 stage profile_124m_bf16_gemmex 90 $bin/train_step_bench $gpt2_124m --B 16 --steps 3 \
    --warmup 2 --device cuda --precision bf16 --peak-tflops 989 --profile
  TAIL=1 stage ceilings 90 python3 bench/gpu_ceilings.py
}
group_kernels() {
  # Where a bf16 step's GPU time goes, kernel by kernel, trident against PyTorch, with no per-op
  # synchronization (bench/gpu_kernel_profile.py): trident's step after two warm-up steps under
  # Nsight Compute (gpu__time_duration of each kernel) and under CUPTI's kernel timestamps
  # (libtrident_kernel_trace.so: also the GPU's idle gaps in the step), PyTorch's (torch.compile)
  # under torch.profiler, both beside their un-profiled step times. The script keeps to a budget
  # inside the stage's limit, so its JSON is written even when a half runs out of time.
  local limit=180 left=$((deadline - (SECONDS - start)))
  ((limit > left)) && limit=$left
  TAIL=24 stage kernels_124m_bf16 $limit python3 bench/gpu_kernel_profile.py --trident-bench $bin/train_step_bench \
    --trace-lib $root/lib/libtrident_kernel_trace.so --size 124M --batch 16 --budget $((limit - 10)) \
    --out "$res/gpu_kernel_profile.json"
}
group_ncu_attention() {
  # Nsight Compute's full set of sections (speed of light, occupancy, memory and compute
  # workload, warp stalls, instruction statistics, source counters) for each tensor-core
  # attention kernel at GPT-2 124M's shape (bf16, B=8, 12 heads, T=1024, HS=64, causal:
  # attention_kernel_test bench's first case, second launch).
  command -v ncu >/dev/null || { echo "== ncu_attention: no ncu"; return; }
  for k in tc_forward_kernel tc_dq_kernel tc_dkdv_kernel; do
    TAIL=3 stage ncu_$k 60 ncu --clock-control none --set full -k regex:$k --launch-skip 1 --launch-count 1 \
      $bin/attention_kernel_test bench
  done
}
group_bench() {
  TAIL=3 stage gpu_train_compare 300 python3 bench/gpu_train_compare.py --trident-bench $bin/train_step_bench \
    --sizes ${BENCH_SIZES:-124M,350M} --batches ${BENCH_BATCHES:-16,32} --reps 1 --steps 10 --warmup 3 --timeout 150 \
    --commit "$(git rev-parse HEAD 2>/dev/null)"
  TAIL=6 stage attention_bench 60 $bin/attention_kernel_test bench
}
group_baseline() {
  # The same attention timings and bf16 step profile from the baseline binaries packed beside
  # these (pack.sh's TRIDENT_GPU_BASELINE): before and after on one GPU.
  [ -d $bin/baseline ] || { echo "== baseline: none packed"; return; }
  TAIL=6 stage attention_bench_baseline 60 $bin/baseline/attention_kernel_test bench
  TAIL=45 stage profile_124m_bf16_baseline 90 $bin/baseline/train_step_bench $gpt2_124m --B 16 --steps 3 \
    --warmup 2 --device cuda --precision bf16 --peak-tflops 989 --profile
  TAIL=2 stage step_124m_bf16_baseline 90 $bin/baseline/train_step_bench $gpt2_124m --B 16 --steps 10 \
    --warmup 3 --device cuda --precision bf16 --peak-tflops 989
  TAIL=2 stage step_124m_bf16 90 $bin/train_step_bench $gpt2_124m --B 16 --steps 10 \
    --warmup 3 --device cuda --precision bf16 --peak-tflops 989
}
group_gate() {
  # Stops the run (the later stages are skipped) unless the attention kernels and the op
  # suite's device cases passed: measuring wrong kernels wastes the device's time.
  if grep -q "^0 failures" "$res/attention_kernel_test.log" 2>/dev/null &&
     grep -q "== op_suite_gpu: exit 0" "$res/status.txt" 2>/dev/null; then
    echo "== gate: passed"
  else
    echo "== gate: a GPU test failed; the remaining stages are skipped" | tee -a "$res/status.txt"
    grep -E "FAIL|Failure" "$res"/attention_kernel_test.log "$res"/op_suite_gpu.log 2>/dev/null | head -30
    touch "$res/stop"
  fi
}
group_variants() {
  # Binaries built with other compile-time tunings (e.g. the attention kernels' warp tiles,
  # Note [Warp tiles]), packed by hand into .gpu/variants.tar.xz as attn_NAME
  # (attention_kernel_test) and tsb_NAME (train_step_bench): each attention build's quick
  # check and timings, each step benchmark's GPT-2 124M bf16 step.
  [ -f .gpu/variants.tar.xz ] || { echo "== variants: none"; return; }
  local dir=/tmp/trident-variants
  rm -rf $dir && mkdir -p $dir && tar -C $dir -xJf .gpu/variants.tar.xz || return
  for f in $dir/attn_*; do
    [ -e "$f" ] || continue
    n=$(basename "$f")
    TAIL=1 stage ${n}_quick 60 "$f" quick
    TAIL=5 stage ${n}_bench 60 "$f" bench
  done
  for f in $dir/tsb_*; do
    [ -e "$f" ] || continue
    TAIL=2 stage $(basename "$f")_step 90 "$f" $gpt2_124m --B 16 --steps 10 --warmup 3 --device cuda \
      --precision bf16 --peak-tflops 989
  done
}
group_llama() {
  # The LLaMA family on the GPU (not yet run on one): the CPU benchmark's 125M shape (GQA 12/4,
  # SwiGLU 2048, vocabulary 32000) in bf16, then with Mistral's sliding window of 256 keys.
  llama="--arch llama --layers 12 --embd 768 --heads 12 --kv-heads 4 --intermediate 2048 --vocab 32000 --T 1024"
  TAIL=3 stage llama125m_bf16 90 $bin/train_step_bench $llama --B 16 --steps 5 --warmup 2 --device cuda \
    --precision bf16 --peak-tflops 989
  TAIL=3 stage llama125m_bf16_window256 90 $bin/train_step_bench $llama --sliding-window 256 --B 16 --steps 5 \
    --warmup 2 --device cuda --precision bf16 --peak-tflops 989
}
group_offload() {
  # ZeRO-Offload: GPT-2 1.5B (L=48, C=1600) in bf16 on a GPU capped at 16 GiB. Its fp32 AdamW
  # state and masters (12 B/param, ~19 GB) do not fit: without --offload it runs out of memory.
  args="--device cuda --precision bf16 --layers 48 --embd 1600 --heads 25 --vocab 50257 --T 1024 --B 2
        --steps 3 --warmup 1 --checkpointing full --peak-tflops 989"
  TRIDENT_CUDA_MEMORY_LIMIT_MB=16384 TAIL=3 stage offload_1p5b 150 $bin/train_step_bench $args --offload
  TRIDENT_CUDA_MEMORY_LIMIT_MB=16384 TAIL=3 stage no_offload_1p5b 60 $bin/train_step_bench $args
  # OFFLOAD_MALLOC=1: the same offload step with glibc's malloc kept off mmap (freed blocks are
  # reused rather than faulted in anew each step), to see whether page faults of the host's
  # fresh fp32 gradient buffers (finish_backward's widening) cost the step time.
  [ "${OFFLOAD_MALLOC:-0}" = 1 ] && GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    TRIDENT_CUDA_MEMORY_LIMIT_MB=16384 TAIL=3 stage offload_1p5b_malloc_no_mmap 150 $bin/train_step_bench $args --offload
  # Without checkpointing: only the bf16 parameters and a bucket of gradients stay on the GPU
  # (Note [Offloaded gradients in flight]), so it fits (trident plan
  # --offload --train.device=cuda with this model: 8.5 GiB at B=2).
  TRIDENT_CUDA_MEMORY_LIMIT_MB=16384 TAIL=3 stage offload_1p5b_no_ckpt 150 $bin/train_step_bench \
    ${args/--checkpointing full/--checkpointing none} --offload
}
group_planner() {
  # The memory model against the GPU's allocator (and the host's, where ZeRO-Offload keeps its
  # state): GPT-2 small in bf16 on one GPU, a few layouts with and without offload.
  TAIL=6 stage planner_gpu 150 $bin/plan_accuracy_bench --config small --train.device=cuda --precision.dtype=bf16 \
    --offload --stride 3 --limit 6 --steps 1 --warmup 1
}
group_cpu() {
  # The host CPU's native bf16 GEMMs through oneDNN where it has AVX512_BF16 or AMX (issue #4):
  # the GEMM wrapper's tests, the op suite's matmul and linear cases on the host, and GPT-2 124M
  # on 2 cores, fp32 against bf16.
  { grep -m1 "model name" /proc/cpuinfo; grep -o -w -E "avx512_bf16|amx_bf16" /proc/cpuinfo | sort -u; } | tee "$res/cpu.txt"
  TAIL=4 stage kernels_test 120 $bin/kernels_test
  TAIL=3 stage op_suite_matmul 120 $bin/op_suite_test --gtest_filter='*matmul*:*linear*' --gtest_brief=1
  for p in fp32 bf16; do
    OMP_NUM_THREADS=2 TAIL=1 stage cpu_124m_$p 120 taskset -c 0,1 $bin/train_step_bench $gpt2_124m --B 4 --steps 2 \
      --warmup 1 --threads 2 --precision $p --sgemm
  done
}
[[ $stages == all ]] && stages="tests gate parity profile bench llama offload train sanitize"
for g in $stages; do
  declare -F "group_$g" >/dev/null || { echo "run.sh: unknown stage $g" >&2; continue; }
  [ -e "$res/stop" ] && { echo "== $g: skipped (gate)"; continue; }
  "group_$g"
done
echo "== done in $((SECONDS - start))s"
tar -C "$res" -czf "$out/gpu-results.tar.gz" .
