#!/usr/bin/env bash
# A shorter GPU run than device-check.sh: the engine over the real CUDA runner
# (engine-cuda.test.ts: GPU-sampled steps against the logits path) and the serving benchmark
# (device-serve.js: random Qwen3-30B-A3B, concurrency 1, 4, 16, 64, 512-token prompts, 256 out,
# EOS ignored, through the gateway and direct, with the weight roofline measured in the same run).
#
#   bash model-server/native-cuda/scripts/prepare-device.sh   # on the CPU machine: addon + bundles from HEAD
#   run(command="bash bench/serving/device-serve-check.sh", timeout_s=280,   # SERVE_RUNS=... for more runs
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

# SERVE_RUNS: serving runs separated by ";", each device-serve's extra arguments (default: the
# Qwen3-30B-A3B run, gateway and direct); SERVE_BUDGET_S: each run's --budget-s (default 170).
# e.g. SERVE_RUNS="--shape qwen3-30b-a3b;--shape deepseek-moe-16b --targets gateway;--shape qwen3-30b-a3b --zipf 1.2 --targets gateway"
SERVE_RUNS=${SERVE_RUNS:---shape qwen3-30b-a3b}
SERVE_BUDGET_S=${SERVE_BUDGET_S:-170}
: > "$W/serve.jsonl"
i=0
IFS=';' read -ra RUNS <<< "$SERVE_RUNS"
for args in "${RUNS[@]}"; do
  i=$((i + 1))
  echo "== serving run $i: $args"
  # shellcheck disable=SC2086
  timeout $((SERVE_BUDGET_S + 20)) $BUN "$BUNDLE/device-serve.js" --concurrency ${SERVE_CONC:-1,4,16,64} --input-len 512 --output-len 256 \
    --budget-s "$SERVE_BUDGET_S" --out "$W/serve-$i" $args > "$W/serve-$i.jsonl" 2> "$W/serve-$i.log"
  echo "exit $?" >> "$W/serve-$i.log"
  grep -hE "KV cache|ready|failed|rror" "$W/serve-$i/model-server.log" 2>/dev/null | head -n 5
  tail -n 3 "$W/serve-$i.log"
  { echo "{\"kind\":\"serve-run\",\"run\":$i,\"args\":\"$args\"}"; grep '^{' "$W/serve-$i.jsonl"; } >> "$W/serve.jsonl"
  # device-serve prints its tables (main runs; gateway overhead) after the JSON lines
  grep -v '^{' "$W/serve-$i.jsonl"
done
cp "$W/serve.jsonl" "$FINAL_OUT/serve.jsonl"
tar -C "$W" --exclude='*-random' -czf "$FINAL_OUT/serve-check.tgz" .
