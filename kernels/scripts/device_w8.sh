#!/usr/bin/env bash
# One call on the GPU machine for the W8A16 tensor-core grouped GEMM: build (plus the off-by-one mutated
# build of the GEMMs), its GPU checks (gpu_test.py --w8) and the mutation check, then
# bench/kernels/w8a16_bench.py. Usage (repo root):
# [W8_BENCH_ARGS="--tokens 1,64"] [GPU_TEST_ARGS=--decode|all] [SKIP_BENCH=1] kernels/scripts/device_w8.sh
# Results land in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
scripts/build_capi.sh > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
grep -h -E "registers|spill|C75" build/capi/sm90_w8a16*.log | tee "$OUT/ptxas-w8.txt" | cut -c1-160
(mkdir -p build/mut && cd build/mut && for s in ../../src/gemm/*.cu; do
   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -DDK_MUTATE_EXPERT_OFF_BY_ONE -c "$s" -o "$(basename "$s" .cu).o" & done; wait
 cp ../capi/capi.o ../capi/router_topk.o ../capi/permute.o ../capi/silu_mul.o ../capi/quantize_int8.o ../capi/pdl_producer.o . &&
 nvcc -shared -gencode=arch=compute_90a,code=sm_90a -o ../libmut.so ./*.o -lcudart_static) >> "$OUT/build.log" 2>&1
echo "build: $(( $(date +%s) - t0 )) s"
cd ..
test_args=${GPU_TEST_ARGS:---w8}; [ "$test_args" = all ] && test_args=""  # all: every family (gpu_test.py's default)
timeout ${TEST_TIMEOUT:-240} python3 -u kernels/test/gpu_test.py $test_args --json "$OUT/gpu_test_w8.json" > "$OUT/gpu_test_w8.log" 2>&1; echo "gpu_test --w8 rc=$?"
grep -E "FAIL|ERROR" "$OUT/gpu_test_w8.log" | head -20 | cut -c1-200; tail -1 "$OUT/gpu_test_w8.log" | cut -c1-400
timeout ${MUT_TIMEOUT:-150} python3 kernels/test/gpu_test.py --w8 --lib kernels/build/libmut.so --expect-fail --json "$OUT/mutation_w8.json" > "$OUT/mutation_w8.log" 2>&1; echo "mutation rc=$?"; tail -1 "$OUT/mutation_w8.log" | cut -c1-400
if [ -z "${SKIP_BENCH:-}" ]; then
  timeout ${BENCH_TIMEOUT:-270} python3 bench/kernels/w8a16_bench.py --out "$OUT/w8a16_bench.json" ${W8_BENCH_ARGS:-} > "$OUT/w8a16_bench.log" 2>&1; echo "bench rc=$?"
  cut -c1-260 "$OUT/w8a16_bench.log" | tail -${BENCH_TAIL:-80}
fi
