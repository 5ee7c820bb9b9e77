#!/usr/bin/env bash
# Builds and runs scripts/gemv_check.cu on the GPU machine: gemv_fast (src/gemv_fast.cu, the
# T <= 8 GEMV gemm() tries first) and the stream GEMM (src/gemm_stream.cuh, T <= 64) against an
# fp64 CPU reference, refusals, determinism and PDL chains, then old (src/gemm.cu's GEMV, the
# skinny GEMM) vs new timed at T 1..64 cold (L2 flushed), hot (a CUDA graph of 20 launches on one
# W) and rotating (a graph of 20 launches on distinct copies of W). See the header of
# gemv_check.cu. From the repository root:
#
#   bash model-server/native-cuda/scripts/gemv-check.sh
#
# Output goes to stdout (and to $OUT/gemv-check.txt when $OUT is set). Exit status: 0 when every
# check passed, 1 on a mismatch, 2 on a build, CUDA or timeout failure. Each GPU run is limited
# to 60 s.
set -u
cd "$(dirname "$0")/.."
source scripts/harness-lib.sh
harness_init gemv-check
# the three sources compile in parallel (gemm.cu's templates take the longest), then link
build_ok=1
for src in scripts/gemv_check.cu src/gemm.cu src/gemv_fast.cu; do
  timeout 300 "$NVCC" "${HARNESS_NVCC_FLAGS[@]}" -Xptxas -warn-spills -c "$src" -o "$BIN.$(basename "$src").o" &
done
for job in $(jobs -p); do wait "$job" || build_ok=0; done
[ "$build_ok" -eq 1 ] && timeout 120 "$NVCC" -gencode=arch=compute_90a,code=sm_90a "$BIN".*.cu.o -o "$BIN" ||
  harness_build_failed
harness_gpu_info
harness_parts check stream time
if [ "$status" -eq 0 ]; then echo "gemv-check: PASS"; else echo "gemv-check: FAIL (status $status)"; fi
exit $status
