#!/usr/bin/env bash
# One call on the GPU machine: compile-time variants of the W8A16 tensor-core GEMM side by side. Builds
# the library, then per variant a copy with that kernel rebuilt under the variant's -D flags; runs
# gpu_test.py --w8 on each variant (unless SKIP_TESTS=1) and times every build on the same rows
# (METHODS: w8a16_bench.py's methods, default w8a16_wgmma).
# Usage (repo root):
#   VARIANTS="base:;one-cta:-DSOME_FLAG=1" [BENCH_ARGS="--models ... --tokens ..."] [ROUNDS=2] bash kernels/scripts/w8_variants.sh
# A variant's flags may start with SRC=<dir>: that variant compiles <dir>/gemm/sm90_w8a16_grouped_gemm_wgmma.cu (a
# kernels/src tree of another revision, made on the CPU machine, e.g.
#   mkdir -p ab/fbedfc2 && git archive fbedfc2 kernels/src | tar -x -C ab/fbedfc2
# then VARIANTS="old:SRC=ab/fbedfc2/kernels/src;new:"; the rest of the library stays HEAD's).
# Profile builds (sm90_w8a16_grouped_gemm_wgmma.cuh, DK_W8_PROFILE; wrong results, so no tests):
#   SKIP_TESTS=1 VARIANTS="base:;no-x:-DDK_W8_PROFILE=1;no-convert:-DDK_W8_PROFILE=2;no-epilogue:-DDK_W8_PROFILE=4" bash kernels/scripts/w8_variants.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(pwd)
cd kernels
t0=$(date +%s)
scripts/build_capi.sh > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
ARCH="-gencode=arch=compute_90a,code=sm_90a"
IFS=';' read -ra VS <<< "${VARIANTS:?VARIANTS=name:flags;...}"
for v in "${VS[@]}"; do
  name=${v%%:*} flags=${v#*:} src=../../src
  if [[ $flags == SRC=* ]]; then  # another revision's source tree (relative to the repository root)
    first=${flags%% *}; src=$ROOT/${first#SRC=}; flags=${flags#"$first"}
  fi
  # shellcheck disable=SC2086
  (mkdir -p "build/var-$name" && cd "build/var-$name" && rm -f ./*.o && cp ../capi/*.o . &&
   nvcc -std=c++17 -O3 $ARCH -Xcompiler -fPIC $flags -c "$src/gemm/sm90_w8a16_grouped_gemm_wgmma.cu" \
     -o sm90_w8a16_grouped_gemm_wgmma.o && nvcc -shared $ARCH -o "../libvar-$name.so" ./*.o -lcudart_static) >> "$OUT/build.log" 2>&1 &
done
wait
echo "build: $(( $(date +%s) - t0 )) s"
cd "$ROOT"
ARGS=${BENCH_ARGS:---models qwen3-30b-a3b,olmoe --tokens 16,64 --routings uniform}
if [ -z "${SKIP_TESTS:-}" ]; then
  for v in "${VS[@]}"; do
    name=${v%%:*}
    timeout 100 python3 -u kernels/test/gpu_test.py --w8 --lib "kernels/build/libvar-$name.so" > "$OUT/test-$name.log" 2>&1
    echo "== $name: tests rc=$? $(tail -1 "$OUT/test-$name.log" | cut -c1-40)"
  done
fi
# Each variant's benchmark is its own process, so variants cannot share interleaved rounds; ROUNDS=2 runs the list
# again in reverse order (bench-<name>-r2.json), so neither variant always runs first.
order=("${VS[@]}")
for round in $(seq 1 "${ROUNDS:-1}"); do
  for v in "${order[@]}"; do
    name=${v%%:*} lib=kernels/build/libvar-${v%%:*}.so
    tag=$name; [ "$round" -gt 1 ] && tag=$name-r$round
    echo "== $tag"
    # shellcheck disable=SC2086
    timeout 100 python3 bench/kernels/w8a16_bench.py --lib "$lib" --methods "${METHODS:-w8a16_wgmma}" $ARGS --out "$OUT/bench-$tag.json" 2>&1 |
      grep -v "^ceiling" | sed -E 's/ +x_bf16.*//; s/w8a16_wgmma=//; s/w8a16_wgmma//g; s/ +(uniform|zipf) +tile= *[0-9]+//' | tr -s ' ' | paste -sd';' | cut -c1-300
  done
  reversed=(); for ((i = ${#order[@]} - 1; i >= 0; i--)); do reversed+=("${order[i]}"); done; order=("${reversed[@]}")
done
tar -C "$OUT" -czf "$OUT/variants.tgz" $(cd "$OUT" && ls bench-*.json test-*.log) && rm -f "$OUT"/bench-*.json "$OUT"/test-*.log
