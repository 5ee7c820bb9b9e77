#!/usr/bin/env bash
# A shorter GPU run than device-check.sh: the engine over the real CUDA runner
# (engine-cuda.test.ts: GPU-sampled steps against the logits path) and the serving benchmark
# (device-serve.js: random Qwen3-30B-A3B, concurrency 1, 4, 16, 64, 512-token prompts, 256 out,
# EOS ignored, through the gateway and direct, with the weight roofline measured in the same run).
#
#   bash model-server/native-cuda/scripts/prepare-device.sh   # on the CPU machine: addon + bundles from HEAD
#   run(command="bash bench/serving/device-serve-check.sh", timeout_s=280,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#
# Writes $OUT/serve-check.tgz (logs, the model server's log, every JSON line; not the random
# model's files) and $OUT/serve.jsonl, and prints the tables device-serve.js ends with.
set -u
FINAL_OUT=${OUT:-/tmp/serve-check-out}
W=/tmp/serve-check
rm -rf "$W"
mkdir -p "$W" "$FINAL_OUT"
bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
BUN=/tmp/bun
BUNDLE=model-server/native-cuda/build/bundle
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$W/nvidia-smi.csv" 2>&1

echo "== engine over the CUDA runner"
timeout 60 $BUN test "./$BUNDLE/engine-cuda.test.js" > "$W/engine-cuda.log" 2>&1
echo "exit $?" >> "$W/engine-cuda.log"
tail -n 8 "$W/engine-cuda.log"

echo "== serving"
timeout 190 $BUN "$BUNDLE/device-serve.js" --shape qwen3-30b-a3b --concurrency 1,4,16,64 --input-len 512 --output-len 256 \
  --budget-s 170 --out "$W/serve" > "$W/serve.jsonl" 2> "$W/serve.log"
echo "exit $?" >> "$W/serve.log"
grep -hE "KV cache|ready|failed|rror" "$W/serve/model-server.log" 2>/dev/null | head -n 5
tail -n 3 "$W/serve.log"
cp "$W/serve.jsonl" "$FINAL_OUT/serve.jsonl"
tar -C "$W" --exclude='qwen3-30b-a3b-random' -czf "$FINAL_OUT/serve-check.tgz" .
# device-serve prints its tables (main runs; gateway overhead) after the JSON lines
grep -v '^{' "$W/serve.jsonl"
