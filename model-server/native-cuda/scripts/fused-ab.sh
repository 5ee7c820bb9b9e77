#!/usr/bin/env bash
# A/B of the fused decode launches (default) against the separate ones (DISPATCH_CUDA_UNFUSED=1)
# on the GPU machine, same carry as device-check.sh:
#
#   bash model-server/native-cuda/scripts/prepare-device.sh   # on the CPU machine: addon + bundles from HEAD
#   run(command="bash model-server/native-cuda/scripts/fused-ab.sh", timeout_s=450,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#
# Stages (each under `timeout`, skipped once BUDGET_S is spent), all output packed into
# $OUT/fused-ab.tgz and the summaries printed:
#   1. GEMM paths + golden fixtures, fused and unfused (tests-fused.log, tests-unfused.log)
#   2. same 2-layer Qwen3-30B-A3B model and steps, fused vs unfused logits (ab.txt)
#   3. decode probe Qwen3-30B-A3B, batches 1,4,16,64, per-op profile: fused, unfused, then fused
#      without PDL (DISPATCH_CUDA_PDL=0, batches 1 and 16)
# (when the fused golden run fails, it is repeated with DISPATCH_CUDA_PDL=0: tests-fused-nopdl.log)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"
stage_begin fused-ab 400

bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
BUN=/tmp/bun

TESTS="src/backend/cuda/gemm.test.ts src/model/cuda-golden.test.ts"
if stage "GEMM paths + golden fixtures, fused" 60; then
  (cd model-server && timeout "$(lim 60)" $BUN test $TESTS) > "$OUT/tests-fused.log" 2>&1
  echo "exit $?" >> "$OUT/tests-fused.log"
fi
if ! grep -q "^exit 0" "$OUT/tests-fused.log" 2>/dev/null && stage "fused failed: again with DISPATCH_CUDA_PDL=0" 60; then
  (cd model-server && DISPATCH_CUDA_PDL=0 timeout "$(lim 60)" $BUN test $TESTS) > "$OUT/tests-fused-nopdl.log" 2>&1
  echo "exit $?" >> "$OUT/tests-fused-nopdl.log"
fi
if stage "GEMM paths + golden fixtures, DISPATCH_CUDA_UNFUSED=1" 60; then
  (cd model-server && DISPATCH_CUDA_UNFUSED=1 timeout "$(lim 60)" $BUN test $TESTS) > "$OUT/tests-unfused.log" 2>&1
  echo "exit $?" >> "$OUT/tests-unfused.log"
fi

if stage "fused vs unfused logits: Qwen3-30B-A3B layer shapes, 2 layers, batches 1 and 16" 50; then
  Q2="--shape qwen3-30b-a3b --layers 2 --batches 1,16 --prompt 512 --steps 6 --sample logits"
  timeout "$(lim 25)" $BUN bench/serving/decode-probe.ts $Q2 --dump-logits "$OUT/logits-fused.f32" > "$OUT/ab-fused.jsonl" 2> "$OUT/ab-fused.log"
  DISPATCH_CUDA_UNFUSED=1 timeout "$(lim 25)" $BUN bench/serving/decode-probe.ts $Q2 --dump-logits "$OUT/logits-unfused.f32" > "$OUT/ab-unfused.jsonl" 2> "$OUT/ab-unfused.log"
  python3 - "$OUT" > "$OUT/ab.txt" 2>&1 <<'PY'
import sys, numpy as np
o = sys.argv[1]
a = np.fromfile(f"{o}/logits-unfused.f32", dtype=np.float32)
b = np.fromfile(f"{o}/logits-fused.f32", dtype=np.float32)
print(f"fused vs unfused: n={a.size} max|unfused|={np.abs(a).max():.4f} max|diff|={np.abs(a-b).max():.5f} "
      f"p99|diff|={np.quantile(np.abs(a-b), 0.99):.5f} argmax unfused={a.argmax()} fused={b.argmax()}")
PY
fi

for mode in fused unfused nopdl; do
  case $mode in unfused) e=DISPATCH_CUDA_UNFUSED=1; b=1,4,16,64 ;; nopdl) e=DISPATCH_CUDA_PDL=0; b=1,16 ;; *) e=; b=1,4,16,64 ;; esac
  if stage "decode probe Qwen3-30B-A3B, $mode" 60; then
    env $e timeout "$(lim 60)" $BUN bench/serving/decode-probe.ts \
      --shape qwen3-30b-a3b --batches $b --prompt 512 --steps 32 --profile > "$OUT/probe-$mode.jsonl" 2> "$OUT/probe-$mode.log"
    echo "exit $?" >> "$OUT/probe-$mode.log"
  fi
done
stage_pack fused-ab.tgz
for f in "$OUT"/stages.log "$OUT"/ab.txt; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
for f in "$OUT"/tests-*.log; do echo "--- $f"; grep -E "^\[|pass|fail|exit" "$f" | tail -n 20; done
for f in "$OUT"/probe-*.jsonl; do echo "--- $f"; cut -c1-400 "$f"; done
