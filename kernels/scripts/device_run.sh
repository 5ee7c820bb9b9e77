#!/usr/bin/env bash
# One call on the GPU machine: build, correctness (incl. the off-by-one mutation), benchmark.
# Usage (repo root): BENCH_ARGS="..." kernels/scripts/device_run.sh   results land in $OUT. Decode only: device_decode.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
scripts/build_capi.sh > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
grep -h -E "registers|spill" build/capi/*.log > "$OUT/ptxas.txt"
# Mutated build: expert index off by one inside both GEMM kernels.
(mkdir -p build/mut && cd build/mut && for s in ../../src/gemm/*.cu; do
   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -DDK_MUTATE_EXPERT_OFF_BY_ONE -c "$s" -o "$(basename "$s" .cu).o" & done; wait
 cp ../capi/capi.o ../capi/router_topk.o ../capi/permute.o ../capi/silu_mul.o ../capi/quantize_int8.o . &&
 nvcc -shared -gencode=arch=compute_90a,code=sm_90a -o ../libmut.so ./*.o -lcudart_static) >> "$OUT/build.log" 2>&1
echo "build: $(( $(date +%s) - t0 )) s"
cuobjdump --dump-sass build/capi/sm90_bf16_grouped_gemm_contiguous.o | grep -oE "HGMMA[.A-Z0-9x]*|UTMALDG[.A-Z0-9]*" | sort | uniq -c > "$OUT/sass_contiguous.txt"
cat "$OUT/sass_contiguous.txt"
cd ..
[ -z "${SKIP_TESTS:-}" ] && timeout ${TEST_TIMEOUT:-360} python3 kernels/test/gpu_test.py --json "$OUT/gpu_test.json" > "$OUT/gpu_test.log" 2>&1; echo "gpu_test rc=$?"
grep -E "FAIL|ERROR" "$OUT/gpu_test.log" | head -20; tail -1 "$OUT/gpu_test.log"
[ -z "${SKIP_TESTS:-}" ] && timeout 200 python3 kernels/test/gpu_test.py --lib kernels/build/libmut.so --expect-fail --json "$OUT/mutation.json" > "$OUT/mutation.log" 2>&1; echo "mutation rc=$?"; tail -1 "$OUT/mutation.log"
if [ -n "${NCU:-}" ]; then
  timeout 120 ncu --clock-control none --kernel-name regex:grouped_gemm --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,launch__occupancy_limit_registers,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    python3 kernels/scripts/ncu_probe.py > "$OUT/ncu.txt" 2>&1; echo "ncu rc=$?"
  grep -E "grouped_gemm|duration|dram__|warps_active|grid_size|registers|sm__throughput" "$OUT/ncu.txt" | sed 's/  */ /g' | cut -c1-150
fi
if [ -n "${BENCH_ARGS:-}" ]; then
  timeout ${BENCH_TIMEOUT:-300} python3 bench/kernels/bench.py --out "$OUT/bench.json" $BENCH_ARGS > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
  tail -${BENCH_TAIL:-12} "$OUT/bench.log" | cut -c1-330
fi
