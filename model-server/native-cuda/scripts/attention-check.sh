#!/usr/bin/env bash
# Builds and runs scripts/attention_check.cu on the GPU machine: the per-head and the
# flash-decoding paged attention kernels against an fp64 CPU reference, then timed (see the
# header of attention_check.cu for the rows and the tolerance). From the repository root:
#
#   bash model-server/native-cuda/scripts/attention-check.sh
#
# Output goes to stdout (and to $OUT/attention-check.txt when $OUT is set). Exit status: 0 when
# every part passed, 1 on a mismatch, 2 on a build, CUDA or timeout failure. Each GPU run is
# limited to 60 s; the three parts run separately so one hang costs one part.
set -u
cd "$(dirname "$0")/.."
source scripts/harness-lib.sh
harness_init attention-check
# fused_ops.cu: pdl_enabled() (the decode kernel launches with programmatic dependent launch)
timeout 300 "$NVCC" "${HARNESS_NVCC_FLAGS[@]}" \
  scripts/attention_check.cu src/attention.cu src/attention_decode.cu src/fused_ops.cu -o "$BIN" || harness_build_failed
harness_gpu_info
harness_parts 1 2 3
exit $status
