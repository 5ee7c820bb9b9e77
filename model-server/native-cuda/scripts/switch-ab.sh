#!/usr/bin/env bash
# One device call that decides whether opt-in kernels become defaults (nvidia-h200, ~6 minutes):
#   1. gemm-bench.sh --prefill    the TMA + wgmma prefill GEMM (DISPATCH_CUDA_GEMM_WGMMA) against the
#                                 mma.sync tiles: correctness, 5-run identity, graph capture, TFLOP/s
#   2. router-check.sh            the 3xTF32 router logits (DISPATCH_CUDA_ROUTER_TC) against fp64
#   3. decode probes of Qwen3-30B-A3B (batches 1 and 64, 512-token prompts: prefill tokens/s and
#      decode) with each switch and both, side by side in this run (env-ab.sh)
#   4. int8 experts at batch 1: the vectorized dequantization against DISPATCH_CUDA_DEQUANT_SCALAR=1
#      (the prefill's tokens/s is the figure)
#   5. the CUDA golden tests with both switches on (the model's logits against the fixtures)
#
#   bash model-server/native-cuda/scripts/prepare-device.sh
#   run(command="bash model-server/native-cuda/scripts/switch-ab.sh", timeout_s=600,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#
# Results: $OUT/switch-ab.tgz (every log), and the summary lines on stdout.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"
stage_begin switch-ab 560
bash model-server/native-cuda/scripts/unpack-carry.sh > /dev/null || exit 1
if stage "gemm-bench --prefill" 200; then
  timeout "$(lim 200)" bash model-server/native-cuda/scripts/gemm-bench.sh --prefill > "$OUT/gemm-prefill.txt" 2>&1
  echo "gemm-bench --prefill exit $?" | tee -a "$OUT/stages.log"
  grep -E "PASS|FAIL|MISMATCH|differ" "$OUT/gemm-prefill.txt" | grep -v " 0 of " | head -8
  grep -E "^(qkv|o_proj|lm_head) .* (tiled|wgmma) " "$OUT/gemm-prefill.txt" | awk '$4 >= 512' | head -24
fi
if stage "router-check" 100; then
  timeout "$(lim 100)" bash model-server/native-cuda/scripts/router-check.sh > "$OUT/router-check.txt" 2>&1
  echo "router-check exit $?" | tee -a "$OUT/stages.log"
  tail -n 20 "$OUT/router-check.txt"
fi
if stage "decode probes" 120; then
  OUT=$OUT/ab timeout "$(lim 120)" bash model-server/native-cuda/scripts/env-ab.sh "--shape qwen3-30b-a3b --batches 1,64 --prompt 512 --steps 24" \
    default: wgmma:DISPATCH_CUDA_GEMM_WGMMA=1 router:DISPATCH_CUDA_ROUTER_TC=1 both:DISPATCH_CUDA_GEMM_WGMMA=1,DISPATCH_CUDA_ROUTER_TC=1
  tar -xzf "$OUT/ab/env-ab.tgz" -C "$OUT/ab" 2>/dev/null
  for f in "$OUT"/ab/*.jsonl; do echo "$(basename "$f" .jsonl): $(grep -o '"batch":[0-9]*,"prompt":[0-9]*,"prefillSeconds":[0-9.]*,"prefillTokS":[0-9]*' "$f" | tr '\n' ' ')"; done
fi
if stage "int8 dequantization" 60; then
  OUT=$OUT/int8 timeout "$(lim 60)" bash model-server/native-cuda/scripts/env-ab.sh "--shape qwen3-30b-a3b --int8 --batches 1,16 --prompt 512 --steps 16" \
    vec: scalar:DISPATCH_CUDA_DEQUANT_SCALAR=1
  tar -xzf "$OUT/int8/env-ab.tgz" -C "$OUT/int8" 2>/dev/null
  for f in "$OUT"/int8/*.jsonl; do echo "int8 $(basename "$f" .jsonl): $(grep -o '"batch":[0-9]*,"prompt":[0-9]*,"prefillSeconds":[0-9.]*,"prefillTokS":[0-9]*' "$f" | tr '\n' ' ')"; done
fi
if stage "golden tests with both switches" 80; then
  (cd model-server && DISPATCH_CUDA_GEMM_WGMMA=1 DISPATCH_CUDA_ROUTER_TC=1 timeout "$(lim 80)" /tmp/bun test src/model/cuda-golden.test.ts src/backend/cuda/gemm.test.ts) > "$OUT/golden-switches.log" 2>&1
  echo "golden tests (switches on) exit $?" | tee -a "$OUT/stages.log"
  tail -n 4 "$OUT/golden-switches.log"
fi
stage_pack switch-ab.tgz
