#!/usr/bin/env bash
# Session 28's features on the GPU machine, one call (written without a GPU; run it when one is lent):
#   1. the engine over the real CUDA runner, bundled (engine-cuda.test.js: GPU-sampled steps against the logits
#      path, with a logit_bias request among the mixed steps: a host row beside device rows);
#   2. the GPU soak with the API's newer features in the mix (n, batches of prompts, echo, JSON mode, logit_bias,
#      priority) and a KV cache too small for the batch (preemption with overlapped decode steps), random
#      Qwen3-30B-A3B (bench/serving/device-soak.ts).
# After prepare-device.sh and the two-call carry (its header):
#   run(command="bash model-server/native-cuda/scripts/features-soak.sh", timeout_s=420,
#       carry=[".carry/bun.xz.part-ab", ".carry/cuda-build.tar.xz"])
# Results: $OUT/features-soak.tgz (stages.log, engine-cuda.log, soak.json, soak-records.jsonl.gz) and the soak's
# verdict line on stdout. SOAK_S (default 200) sets the soak's length.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"
stage_begin features-soak 400

bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
BUN=/tmp/bun
B=model-server/native-cuda/build/bundle

if stage "engine over the CUDA runner (logit_bias host row among device rows)" 60; then
  timeout "$(lim 60)" $BUN test ./$B/engine-cuda.test.js > "$OUT/engine-cuda.log" 2>&1
  echo "exit $?" >> "$OUT/engine-cuda.log"
  tail -4 "$OUT/engine-cuda.log"
fi

if stage "GPU soak: features + a starved KV cache" 330; then
  timeout "$(lim 330)" $BUN $B/device-soak.js --shape qwen3-30b-a3b --duration "${SOAK_S:-200}" --rate 24 --max-in-flight 128 \
    --features --server-args="--kv-blocks 1024" --out "$OUT/soak" > "$OUT/soak-stdout.log" 2> "$OUT/soak-stderr.log"
  echo "exit $?" >> "$OUT/soak-stderr.log"
  tail -2 "$OUT/soak-stderr.log"
  [ -f "$OUT/soak/soak-records.jsonl" ] && gzip -f "$OUT/soak/soak-records.jsonl"
fi

stage_pack features-soak.tgz
