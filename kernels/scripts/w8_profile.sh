#!/usr/bin/env bash
# One call on the GPU machine: where the W8A16 tensor-core GEMM's time goes at decode sizes. Builds the
# library and two profile builds of the kernel (-DDK_W8_PROFILE=1..2: no token-tile loads, no
# conversion; wrong results, only timed), runs gpu_test.py --w8 on the real
# build, then times each build on the same rows (bench/kernels/w8a16_bench.py --methods ...: the default
# tile at 2 and 1 CTAs per SM, the 8-token tile).
# BENCH_ARGS="...": then a w8a16_bench.py run of the real build with those arguments.
# Usage (repo root): [PROF_ARGS="--models ... --tokens ..."] [PROF_VARIANTS="0 2"] [SKIP_TESTS=1] bash kernels/scripts/w8_profile.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(pwd)
cd kernels
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
scripts/build_capi.sh > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
ARCH="-gencode=arch=compute_90a,code=sm_90a"
for v in 1 2; do
  (mkdir -p "build/prof$v" && cd "build/prof$v" && rm -f ./*.o && cp ../capi/*.o . &&
   nvcc -std=c++17 -O3 $ARCH -Xcompiler -fPIC -DDK_W8_PROFILE=$v -c ../../src/gemm/sm90_w8a16_grouped_gemm_wgmma.cu \
     -o sm90_w8a16_grouped_gemm_wgmma.o &&
   nvcc -shared $ARCH -o "../libprof$v.so" ./*.o -lcudart_static) >> "$OUT/build.log" 2>&1 &
done
wait
echo "build: $(( $(date +%s) - t0 )) s"
cd "$ROOT"
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout ${TEST_TIMEOUT:-240} python3 -u kernels/test/gpu_test.py --w8 --json "$OUT/gpu_test_w8.json" > "$OUT/gpu_test_w8.log" 2>&1
  echo "gpu_test --w8 rc=$?"
  grep -E "FAIL|ERROR" "$OUT/gpu_test_w8.log" | head -20 | cut -c1-200; tail -1 "$OUT/gpu_test_w8.log" | cut -c1-400
fi
ARGS=${PROF_ARGS:---models qwen3-30b-a3b,olmoe,deepseek-v3 --tokens 16,64 --routings uniform}
for v in ${PROF_VARIANTS:-0 1 2}; do
  lib=kernels/build/libdispatch_kernels.so; [ "$v" = 0 ] || lib=kernels/build/libprof$v.so
  echo "== profile $v"
  # shellcheck disable=SC2086
  timeout 120 python3 bench/kernels/w8a16_bench.py --lib "$lib" --methods w8a16_wgmma,w8a16_wgmma_1cta,w8a16_wgmma_t8 $ARGS \
    --out "$OUT/prof$v.json" 2>&1 | grep -v "^ceiling" | sed -E 's/ +x_bf16.*//; s/w8a16_wgmma//g; s/ +(uniform|zipf) +tile= *[0-9]+//' | cut -c1-160
done
tar -C "$OUT" -czf "$OUT/prof.tgz" $(cd "$OUT" && ls prof*.json) && rm -f "$OUT"/prof*.json  # the device tool returns few files
if [ -n "${BENCH_ARGS:-}" ]; then
  # shellcheck disable=SC2086
  timeout 200 python3 bench/kernels/w8a16_bench.py $BENCH_ARGS --out "$OUT/w8a16_bench.json" > "$OUT/w8a16_bench.log" 2>&1
  echo "bench rc=$?"; cut -c1-260 "$OUT/w8a16_bench.log" | tail -60
fi
