#!/usr/bin/env bash
# Builds and runs scripts/prefill_check.cu on the GPU machine: the tiled prefill attention
# (attention_flash.cu) and the per-head kernel against an fp64 CPU reference, and linear_f32's
# tiled and row kernels against fp64, each timed (see the header of prefill_check.cu). From the
# repository root:
#
#   bash model-server/native-cuda/scripts/prefill-check.sh
#
# Output goes to stdout (and to $OUT/prefill-check.txt when $OUT is set; the ptxas report of the
# build to $OUT/prefill-check-ptxas.txt). Exit status: 0 when every part passed, 1 on a
# mismatch, 2 on a build, CUDA or timeout failure. Each GPU run is limited to 60 s; the two parts
# run separately so one hang costs one part.
set -u
cd "$(dirname "$0")/.."
source scripts/harness-lib.sh
harness_init prefill-check
PTXAS_LOG=${TMPDIR:-/tmp}/prefill-check-ptxas.txt
if [ "$HARNESS_OUT_LOGGING" -eq 1 ]; then PTXAS_LOG=$OUT/prefill-check-ptxas.txt; fi
timeout 300 "$NVCC" "${HARNESS_NVCC_FLAGS[@]}" -Xptxas -v \
  scripts/prefill_check.cu src/attention_flash.cu src/attention_flash_wgmma.cu src/flash_plan.cu src/attention.cu src/attention_decode.cu src/attention_decode_splitk.cu \
  src/attention_decode_cluster.cu src/device_info.cu src/ops.cu src/fused_ops.cu src/route_small.cu \
  -o "$BIN" >"$PTXAS_LOG" 2>&1 || { cat "$PTXAS_LOG"; harness_build_failed; }
grep -E "warning|error" "$PTXAS_LOG"
echo "== spills (non-zero):"
grep -E "spill" "$PTXAS_LOG" | grep -v " 0 bytes spill stores, 0 bytes spill loads" || echo "none"
harness_gpu_info
harness_parts attn linear
exit $status
