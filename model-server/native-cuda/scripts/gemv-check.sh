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
harness_build_objects scripts/gemv_check.cu src/gemm.cu src/gemv_fast.cu
harness_gpu_info
harness_parts check stream time
if [ "$status" -eq 0 ]; then echo "gemv-check: PASS"; else echo "gemv-check: FAIL (status $status)"; fi
exit $status
