#!/usr/bin/env bash
# Builds and runs scripts/router_check.cu on the GPU machine: the router-logit linear layer
# (fp32 Y[T, E] = X[T, H] W[E, H]^T) through linear_f32's existing kernels and the 3xTF32
# tensor-core kernel (src/linear_f32_tc.cuh) against an fp64 CPU reference, 5-run bit identity,
# the DISPATCH_CUDA_ROUTER_TC=1 entry, and both timed in CUDA graphs with W rotated past L2 (see
# the header of router_check.cu). From the repository root:
#
#   bash model-server/native-cuda/scripts/router-check.sh
#
# Output goes to stdout (and to $OUT/router-check.txt when $OUT is set; the ptxas report to
# $OUT/router-check-ptxas.txt). Exit status: 0 when every part passed, 1 on a mismatch, 2 on a
# build, CUDA or timeout failure. Each GPU run is limited to 60 s.
set -u
cd "$(dirname "$0")/.."
source scripts/harness-lib.sh
harness_init router-check
PTXAS_LOG=${TMPDIR:-/tmp}/router-check-ptxas.txt
if [ "$HARNESS_OUT_LOGGING" -eq 1 ]; then PTXAS_LOG=$OUT/router-check-ptxas.txt; fi
timeout 300 "$NVCC" "${HARNESS_NVCC_FLAGS[@]}" -Xptxas -v scripts/router_check.cu src/ops.cu src/fused_ops.cu \
  src/route_small.cu -o "$BIN" >"$PTXAS_LOG" 2>&1 || { cat "$PTXAS_LOG"; harness_build_failed; }
grep -E "warning|error" "$PTXAS_LOG"
echo "== 3xTF32 kernels (registers, spills):"
grep -A4 "Compiling entry function.*sm90_f32_linear_3xtf32" "$PTXAS_LOG" | grep -E "Compiling|registers|spill" | sed "s/.*3xtf32I/  /"
echo "== spills (non-zero):"
grep -E "spill" "$PTXAS_LOG" | grep -v " 0 bytes spill stores, 0 bytes spill loads" || echo "none"
harness_gpu_info
(DISPATCH_CUDA_ROUTER_TC=0 harness_parts check time; exit $status)  # "old" = the CUDA-core paths
harness_fold $?
DISPATCH_CUDA_ROUTER_TC=1 harness_run "part entry" "part entry exit" --part entry
if [ "$status" -eq 0 ]; then echo "router-check: PASS"; else echo "router-check: FAIL (status $status)"; fi
exit $status
