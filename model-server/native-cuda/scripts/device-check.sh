#!/usr/bin/env bash
# One planned run of the CUDA backend on the GPU machine (no Node there: Bun travels as
# .carry/bun.xz; the addon is built on the CPU machine with nvcc 13 for sm_90a and carried as
# model-server/native-cuda/build/Release/dispatch_cuda.node). Stages run in order of
# importance, each with its own limit, and are skipped once BUDGET_S seconds have gone, so a
# cut-short run still returns what it finished. Everything lands in $OUT.
#
#   bash model-server/native-cuda/scripts/prepare-device.sh   # on the CPU machine: addon + bundles from HEAD
#   run(command="bash model-server/native-cuda/scripts/device-check.sh", timeout_s=400,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
# The device returns at most 8 files from $OUT, so the stages write under a work folder and
# the end packs it into $OUT/cuda-check.tgz (logit dumps left out) and prints the summaries.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"
stage_begin cuda-check 345

bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
BUN=/tmp/bun
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv > "$OUT/nvidia-smi.csv" 2>&1
echo "bun $($BUN --version)" >> "$OUT/stages.log"

if stage "cuda tests: addon, backend selection, golden fixtures (bf16 and int8 experts), GPU sampling" 80; then
  (cd model-server && timeout "$(lim 80)" $BUN test src/backend/cuda src/model/cuda-golden.test.ts src/model/cuda-sampling.test.ts) > "$OUT/tests.log" 2>&1
  echo "exit $?" >> "$OUT/tests.log"
  # the engine over the real CUDA runner (GPU-sampled steps against the logits path), bundled:
  # the GPU machine has no node_modules
  if [ -f model-server/native-cuda/build/bundle/engine-cuda.test.js ]; then
    timeout "$(lim 40)" $BUN test ./model-server/native-cuda/build/bundle/engine-cuda.test.js > "$OUT/engine-cuda.log" 2>&1
    echo "exit $?" >> "$OUT/engine-cuda.log"
  fi
  # penalties and top log-probabilities on the GPU (the engine over the runner among them): bundled too
  if [ -f model-server/native-cuda/build/bundle/cuda-sampling-extras.test.js ]; then
    timeout "$(lim 60)" $BUN test ./model-server/native-cuda/build/bundle/cuda-sampling-extras.test.js > "$OUT/sampling-extras.log" 2>&1
    echo "exit $?" >> "$OUT/sampling-extras.log"
  fi
fi

probe() { # name, args...
  local name=$1; shift
  timeout "$(lim 60)" $BUN bench/serving/decode-probe.ts "$@" > "$OUT/$name.jsonl" 2> "$OUT/$name.log"
  echo "exit $?" >> "$OUT/$name.log"
}

if stage "paths at Qwen3-30B-A3B layer shapes (2 layers): kernels/ GEMMs vs reference grouped GEMM, int8 experts, tiled attention" 50; then
  Q2="--shape qwen3-30b-a3b --layers 2 --batches 1,16 --prompt 512 --steps 6 --sample logits"
  DISPATCH_CUDA_REF_MOE=1 probe consistency-ref $Q2 --dump-logits "$OUT/logits-ref.f32"
  probe consistency-kernels $Q2 --dump-logits "$OUT/logits-kernels.f32"
  probe consistency-int8 $Q2 --int8 --dump-logits "$OUT/logits-int8.f32"
  DISPATCH_CUDA_FLASH=1 probe consistency-flash $Q2 --dump-logits "$OUT/logits-flash.f32"
  python3 - "$OUT" > "$OUT/consistency.txt" 2>&1 <<'PY'
import sys, numpy as np
o = sys.argv[1]
ref = np.fromfile(f"{o}/logits-ref.f32", dtype=np.float32)
ker = np.fromfile(f"{o}/logits-kernels.f32", dtype=np.float32)
for name, base, base_name in [("kernels", ref, "ref"), ("int8", ker, "kernels"), ("flash", ker, "kernels")]:
    try:
        b = np.fromfile(f"{o}/logits-{name}.f32", dtype=np.float32)
        print(f"{name} vs {base_name}: max|{base_name}|={np.abs(base).max():.4f} max|diff|={np.abs(base-b).max():.5f} argmax {base_name}={base.argmax()} {name}={b.argmax()}")
    except Exception as e:
        print(f"{name}: {e}")
PY
fi

if stage "decode probe: Qwen3-30B-A3B shape, random weights, bf16" 80; then
  timeout "$(lim 80)" $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --batches 1,4,16,64 --prompt 512 --steps 32 --profile > "$OUT/probe-qwen3.jsonl" 2> "$OUT/probe-qwen3.log"
  echo "exit $?" >> "$OUT/probe-qwen3.log"
fi

if stage "transformers bf16 greedy 64 vs the CUDA backend" 70; then
  timeout "$(lim 50)" python3 model-server/native-cuda/scripts/hf_bf16_greedy.py --out "$OUT/hf-greedy.json" --tokens 64 > "$OUT/hf-greedy.log" 2>&1
  timeout "$(lim 25)" $BUN model-server/native-cuda/scripts/compare-greedy.ts "$OUT/hf-greedy.json" > "$OUT/greedy-compare.jsonl" 2> "$OUT/greedy-compare.log"
  timeout "$(lim 25)" $BUN model-server/native-cuda/scripts/near-ties.ts "$OUT/hf-greedy.json" "$OUT/greedy-compare.jsonl" > "$OUT/near-ties.jsonl" 2> "$OUT/near-ties.log"
  tail -n 1 "$OUT/near-ties.jsonl" >> "$OUT/near-ties.log"
fi

# SKIP_SERVING=1: leave the serving stage to bench/serving/device-serve-check.sh (its own call)
if [ "${SKIP_SERVING:-0}" != 1 ] && stage "serving: gateway + model server (CUDA) on a random Qwen3-30B-A3B, concurrency 1, 4, 16, 64, 512-token prompts, 256 out (EOS ignored), through the gateway and direct, with the weight roofline" 150; then
  BUNDLE=model-server/native-cuda/build/bundle
  # A bundle from before make-bundles.sh rewrote tiktoken's __dirname looks for the wasm under
  # <each parent of the build machine's path>/node_modules/tiktoken: give it the root one.
  if grep -q 'node_modules/tiktoken";' "$BUNDLE/model-server.js"; then
    echo "stale bundle: tiktoken's wasm copied to /node_modules/tiktoken" >> "$OUT/stages.log"
    mkdir -p /node_modules/tiktoken && cp "$BUNDLE/tiktoken_bg.wasm" /node_modules/tiktoken/
  fi
  SERVE_S=$(lim 150)
  timeout "$SERVE_S" $BUN $BUNDLE/device-serve.js --shape qwen3-30b-a3b --concurrency 1,4,16,64 --input-len 512 --output-len 256 \
    --budget-s $((SERVE_S - 20)) --out "$OUT/serve" > "$OUT/serve.jsonl" 2> "$OUT/serve.log"
  echo "exit $?" >> "$OUT/serve.log"
  grep -hE "KV cache|ready|failed|error" "$OUT/serve/model-server.log" 2>/dev/null | head -n 5 >> "$OUT/serve.log"
fi

if stage "decode probe: deepseek-moe-16b shape, random weights, bf16" 50; then
  timeout "$(lim 50)" $BUN bench/serving/decode-probe.ts --shape deepseek-moe-16b --batches 1,16,64 --prompt 512 --steps 32 > "$OUT/probe-deepseek.jsonl" 2> "$OUT/probe-deepseek.log"
  echo "exit $?" >> "$OUT/probe-deepseek.log"
fi

if stage "decode probe: Qwen3-30B-A3B shape, int8 experts" 40; then
  timeout "$(lim 40)" $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --batches 1,64 --prompt 512 --steps 24 --int8 > "$OUT/probe-qwen3-int8.jsonl" 2> "$OUT/probe-qwen3-int8.log"
  echo "exit $?" >> "$OUT/probe-qwen3-int8.log"
fi

if stage "decode probe: Qwen3-30B-A3B shape, logits to the host instead of GPU sampling" 30; then
  timeout "$(lim 30)" $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --batches 1,64 --prompt 512 --steps 24 --sample logits > "$OUT/probe-qwen3-logits.jsonl" 2> "$OUT/probe-qwen3-logits.log"
fi
stage_pack cuda-check.tgz
for f in "$OUT"/stages.log "$OUT"/consistency.txt; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
for f in "$OUT"/*.log; do echo "--- $f"; tail -n 6 "$f"; done
