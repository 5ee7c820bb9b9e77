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
exec 2>&1
PTXAS_LOG=${TMPDIR:-/tmp}/prefill-check-ptxas.txt
if [ -n "${OUT:-}" ] && mkdir -p "$OUT"; then
  exec > >(tee "$OUT/prefill-check.txt") 2>&1
  PTXAS_LOG=$OUT/prefill-check-ptxas.txt
fi
BIN=${TMPDIR:-/tmp}/prefill_check
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "== build ($("$NVCC" --version | tail -1))"
timeout 300 "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -Isrc -I../../kernels/src \
  scripts/prefill_check.cu src/attention_flash.cu src/attention.cu src/attention_decode.cu src/ops.cu src/fused_ops.cu \
  -o "$BIN" >"$PTXAS_LOG" 2>&1 || { cat "$PTXAS_LOG"; echo "== build failed"; exit 2; }
grep -E "warning|error" "$PTXAS_LOG"
echo "== spills (non-zero):"
grep -E "spill" "$PTXAS_LOG" | grep -v " 0 bytes spill stores, 0 bytes spill loads" || echo "none"
timeout 60 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
status=0
for part in attn linear; do
  echo "== part $part"
  timeout 60 "$BIN" --part "$part"
  rc=$?
  echo "== part $part exit $rc"
  if [ "$rc" -eq 1 ] && [ "$status" -eq 0 ]; then status=1; fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then status=2; fi
done
exit $status
