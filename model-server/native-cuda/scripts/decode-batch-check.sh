#!/usr/bin/env bash
# Decode steps of 65-256 sequences, one device call (carry as device-check.sh): whether the flash-decoding
# attention kernel should take them (DISPATCH_CUDA_ATTN_DECODE_MAX_TOKENS, default 64; above it the per-head
# kernel reads every K/V row once per query head). 1. attention-check.sh (fp64 reference, its T = 128 / 256
# decode rows run with the bound at 256); 2. decode probes of Qwen3-30B-A3B at batches 64, 128, 256 with the
# default and with 256, bf16 and int8 experts.
#   run(command="bash model-server/native-cuda/scripts/decode-batch-check.sh", carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
set -u
FINAL_OUT=${OUT:-/tmp/decode-batch-check-out}
mkdir -p "$FINAL_OUT"
OUT="$FINAL_OUT" timeout 240 bash model-server/native-cuda/scripts/attention-check.sh > "$FINAL_OUT/attention-check.txt" 2>&1
echo "attention-check exit $?: $(tail -n 1 "$FINAL_OUT/attention-check.txt")"
grep -E "MISMATCH|FAIL" "$FINAL_OUT/attention-check.txt" | head -10
for extra in "" "--int8"; do
  echo "== probes ${extra:-bf16}"
  OUT="$FINAL_OUT/env-ab${extra}" bash model-server/native-cuda/scripts/env-ab.sh \
    "--shape qwen3-30b-a3b --batches 64,128,256 --prompt 512 --steps 24 $extra" default: d256:DISPATCH_CUDA_ATTN_DECODE_MAX_TOKENS=256
done
