#!/usr/bin/env bash
# int8 experts on the GPU machine, one call (carry as device-check.sh): the W8A16 tensor-core path
# (default) against the earlier int8 paths (DISPATCH_CUDA_INT8_WGMMA=0: small-M to 64 tokens, a
# per-layer bf16 dequantization above) and against bf16 experts.
#   1. logits after a 512-token prefill (the prefill runs the tensor-core kernel) on a 2-layer
#      Qwen3-30B-A3B shape, random weights: new int8 vs old int8 vs bf16 (max |diff|, argmax);
#   2. decode probes of the full Qwen3-30B-A3B shape with int8 experts, both settings, same process
#      order: prefill tokens/s and decode step time per batch.
#   run(command="bash model-server/native-cuda/scripts/int8-check.sh", carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
# INT8_BATCHES (default 1,32,64,128) sets the probe batches.
set -u
FINAL_OUT=${OUT:-/tmp/int8-check-out}
W=/tmp/int8-check
rm -rf "$W"
mkdir -p "$W" "$FINAL_OUT"
bash model-server/native-cuda/scripts/unpack-carry.sh > /dev/null || exit 1
BUN=/tmp/bun
Q2="--shape qwen3-30b-a3b --layers 2 --batches 1 --prompt 512 --steps 6 --sample logits"
# shellcheck disable=SC2086
timeout 60 $BUN bench/serving/decode-probe.ts $Q2 --dump-logits "$W/bf16.f32" > "$W/c-bf16.jsonl" 2> "$W/c-bf16.log"
# shellcheck disable=SC2086
timeout 60 $BUN bench/serving/decode-probe.ts $Q2 --int8 --dump-logits "$W/int8.f32" > "$W/c-int8.jsonl" 2> "$W/c-int8.log"
# shellcheck disable=SC2086
DISPATCH_CUDA_INT8_WGMMA=0 timeout 60 $BUN bench/serving/decode-probe.ts $Q2 --int8 --dump-logits "$W/int8old.f32" > "$W/c-int8old.jsonl" 2> "$W/c-int8old.log"
python3 - "$W" <<'PY' | tee "$W/consistency.txt"
import sys, numpy as np
w = sys.argv[1]
L = {n: np.fromfile(f"{w}/{n}.f32", dtype=np.float32) for n in ("bf16", "int8", "int8old")}
for a, b in (("int8", "int8old"), ("int8", "bf16"), ("int8old", "bf16")):
    d = np.abs(L[a] - L[b])
    print(f"{a} vs {b}: max|{b}|={np.abs(L[b]).max():.4f} max|diff|={d.max():.5f} mean|diff|={d.mean():.6f} argmax {a}={L[a].argmax()} {b}={L[b].argmax()}")
PY
BATCHES=${INT8_BATCHES:-1,32,64,128}
for v in "new:" "old:DISPATCH_CUDA_INT8_WGMMA=0"; do
  IFS=: read -r name e <<< "$v"
  # shellcheck disable=SC2086
  env $e timeout 120 $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --int8 --batches "$BATCHES" --prompt 512 --steps 24 > "$W/probe-$name.jsonl" 2> "$W/probe-$name.log"
  echo "== $name (${e:-defaults}) exit $?"
  grep '"decodeStepMs"' "$W/probe-$name.jsonl" | sed -E 's/.*"batch":([0-9]+).*"prefillTokS":([0-9]+).*"decodeStepMs":([0-9.]+),"decodeTokS":([0-9]+),"rooflineTokS":([0-9]+),"ofRoofline":([0-9.]+).*/  batch \1: prefill \2 tok\/s; decode \3 ms, \4 tok\/s, roofline \5, share \6/'
done
tar -C "$W" --exclude='*.f32' -czf "$FINAL_OUT/int8-check.tgz" .
cp "$W/consistency.txt" "$FINAL_OUT/" 2>/dev/null
