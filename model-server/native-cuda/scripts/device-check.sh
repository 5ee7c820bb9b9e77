#!/usr/bin/env bash
# One planned run of the CUDA backend on the GPU machine (no Node there: Bun travels as
# .carry/bun.xz; the addon is built on the CPU machine with nvcc 13 for sm_90a and carried as
# model-server/native-cuda/build/Release/dispatch_cuda.node). Every stage logs to $OUT and the
# next stage runs whatever the last one did; each has its own time limit.
#
#   run(command="bash model-server/native-cuda/scripts/device-check.sh",
#       carry=[".carry/bun.xz", "model-server/native-cuda/build/Release/dispatch_cuda.node"])
set -u
OUT=${OUT:-/tmp/cuda-check}
mkdir -p "$OUT"
ROOT=$(pwd)
stage() { echo "== $1 ($(date -u +%T))" | tee -a "$OUT/stages.log"; }

stage "setup"
xz -dc .carry/bun.xz > /tmp/bun && chmod +x /tmp/bun
BUN=/tmp/bun
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv > "$OUT/nvidia-smi.csv" 2>&1
$BUN --version >> "$OUT/stages.log" 2>&1

stage "cuda tests (addon load, backend selection, golden fixtures in bf16, GPU sampling)"
(cd model-server && timeout 90 $BUN test src/backend/cuda src/model/cuda-golden.test.ts src/model/cuda-sampling.test.ts) > "$OUT/tests.log" 2>&1
echo "exit $?" >> "$OUT/tests.log"

stage "MoE path consistency at Qwen3-30B-A3B layer shapes (kernels/ GEMMs vs the reference grouped GEMM)"
timeout 60 env DISPATCH_CUDA_REF_MOE=1 $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --layers 2 --batches 1 --prompt 128 --steps 8 --dump-logits "$OUT/logits-ref.f32" > "$OUT/consistency-ref.jsonl" 2> "$OUT/consistency-ref.log"
timeout 60 $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --layers 2 --batches 1 --prompt 128 --steps 8 --dump-logits "$OUT/logits-kernels.f32" > "$OUT/consistency-kernels.jsonl" 2> "$OUT/consistency-kernels.log"
python3 - "$OUT" > "$OUT/consistency.txt" 2>&1 <<'PY'
import sys, numpy as np
o = sys.argv[1]
a = np.fromfile(f"{o}/logits-ref.f32", dtype=np.float32); b = np.fromfile(f"{o}/logits-kernels.f32", dtype=np.float32)
print(f"max|ref|={np.abs(a).max():.4f} max|diff|={np.abs(a-b).max():.5f} argmax ref={a.argmax()} kernels={b.argmax()}")
PY

stage "transformers bf16 greedy 64 vs CUDA backend"
timeout 90 python3 model-server/native-cuda/scripts/hf_bf16_greedy.py --out "$OUT/hf-greedy.json" --tokens 64 > "$OUT/hf-greedy.log" 2>&1
timeout 40 $BUN model-server/native-cuda/scripts/compare-greedy.ts "$OUT/hf-greedy.json" > "$OUT/greedy-compare.jsonl" 2> "$OUT/greedy-compare.log"

stage "decode probe: Qwen3-30B-A3B shape, random weights"
timeout 100 $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --batches 1,4,16,64 --prompt 512 --steps 40 > "$OUT/probe-qwen3.jsonl" 2> "$OUT/probe-qwen3.log"
timeout 40 $BUN bench/serving/decode-probe.ts --shape qwen3-30b-a3b --batches 1,64 --prompt 512 --steps 24 --sample logits > "$OUT/probe-qwen3-logits.jsonl" 2> "$OUT/probe-qwen3-logits.log"

stage "decode probe: deepseek-moe-16b shape, random weights"
timeout 60 $BUN bench/serving/decode-probe.ts --shape deepseek-moe-16b --batches 1,16,64 --prompt 512 --steps 40 > "$OUT/probe-deepseek.jsonl" 2> "$OUT/probe-deepseek.log"

stage "done"
cd "$ROOT"
