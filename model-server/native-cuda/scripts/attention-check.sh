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
exec 2>&1
if [ -n "${OUT:-}" ] && mkdir -p "$OUT"; then exec > >(tee "$OUT/attention-check.txt") 2>&1; fi
BIN=${TMPDIR:-/tmp}/attention_check
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "== build ($("$NVCC" --version | tail -1))"
# fused_ops.cu: pdl_enabled() (the decode kernel launches with programmatic dependent launch)
timeout 300 "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Isrc -I../../kernels/src \
  scripts/attention_check.cu src/attention.cu src/attention_decode.cu src/fused_ops.cu -o "$BIN" || { echo "== build failed"; exit 2; }
timeout 60 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
status=0
for part in 1 2 3; do
  echo "== part $part"
  timeout 60 "$BIN" --part "$part"
  rc=$?
  echo "== part $part exit $rc"
  if [ "$rc" -eq 1 ] && [ "$status" -eq 0 ]; then status=1; fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then status=2; fi
done
exit $status
