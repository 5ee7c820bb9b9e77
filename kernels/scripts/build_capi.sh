#!/usr/bin/env bash
# Builds kernels/build/libdispatch_kernels.so (C ABI, for the Python harnesses on the GPU machine).
# Every .cu compiles in parallel; usage: kernels/scripts/build_capi.sh [extra nvcc flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/capi
mkdir -p "$out"
rm -f "$out"/*.o  # every source is rebuilt below; an object whose source was deleted must not be linked
ARCH="-gencode=arch=compute_90a,code=sm_90a"
srcs=$(find src -name '*.cu' | sort)
for s in $srcs; do
  echo "nvcc -std=c++17 -O3 $ARCH -Xcompiler -fPIC -Xptxas -v $* -c $s -o $out/$(basename "$s" .cu).o > $out/$(basename "$s" .cu).log 2>&1 || (cat $out/$(basename "$s" .cu).log; exit 1)"
done | xargs -P "$(nproc)" -I{} bash -c "{}"
g++ -std=c++17 -O2 -fPIC -I"${CUDA_HOME:-/usr/local/cuda}/include" -c src/capi/capi.cpp -o "$out/capi.o"
nvcc -shared $ARCH -o build/libdispatch_kernels.so "$out"/*.o -lcudart_static
echo "built build/libdispatch_kernels.so"
