#!/usr/bin/env bash
# Builds and runs scripts/qkv_gemm_check.cu on the GPU machine: the q|k|v projection with qkv_post in its epilogue
# (gemm_qkv_post, src/gemm_wgmma_qkv.cuh) against gemm() + qkv_post() on the same inputs (q within 1e-5 of the
# largest |q|, the caches within one bf16 rounding, untouched rows untouched, reruns bit-identical), then both timed
# at Qwen3-30B-A3B's shape (see the header of qkv_gemm_check.cu). From the repository root:
#
#   bash model-server/native-cuda/scripts/qkv-gemm-check.sh
#
# Output goes to stdout (and to $OUT/qkv-gemm-check.txt when $OUT is set); the last line is "qkv-gemm-check: PASS" or
# "qkv-gemm-check: FAIL". Exit status: 0 when every case passed, 1 on a mismatch, 2 on a build, CUDA or timeout
# failure. The GPU run is limited to 120 s.
set -u
cd "$(dirname "$0")/.."
source scripts/harness-lib.sh
harness_init qkv-gemm-check
harness_build_objects scripts/qkv_gemm_check.cu src/gemm.cu src/gemv_fast.cu src/fused_ops.cu src/route_small.cu
harness_gpu_info
timeout 120 "$BIN"
harness_fold $?
exit $status
