#!/usr/bin/env bash
# A/B of the MoE layer's expert-GEMM driving on the GPU machine, same carry as device-check.sh:
#   new: SiLU fused into the gate/up grouped GEMM (interleaved gate/up rows), int8 small-M tile
#        from small_m_rows_hint (the kernels' benchmark rule);
#   old: DISPATCH_CUDA_FUSED_SILU=0 (plain layout + SiLU-mul launch), DISPATCH_CUDA_SMALL_M_HINT=64
#        (int8 tile of T rows at batch 64).
#
#   bash model-server/native-cuda/scripts/prepare-device.sh   # on the CPU machine: addon + bundles from HEAD
#   run(command="bash model-server/native-cuda/scripts/moe-ab.sh", timeout_s=500,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#
# Stages (each under `timeout`, skipped once BUDGET_S is spent), packed into $OUT/moe-ab.tgz:
#   1. logits of one 2-layer Qwen3-30B-A3B-shaped model (batches 1, 16, 64: small-M, small-M,
#      wgmma / W8A16 paths; 512-token prefill: wgmma / dequantize+wgmma): reference grouped GEMM
#      (DISPATCH_CUDA_REF_MOE=1, plain layout), new and old bf16, new and old int8 (ab.txt)
#   2. decode probe, Qwen3-30B-A3B 48 layers, batches 1 and 64, per-op profile: bf16 new/old,
#      int8 new/old, then int8 with only the hint changed (probe-*.jsonl)
# Success: ab.txt shows bf16 new and old both within a bf16 rounding distance of the reference
# (max|diff| of the same order as old-vs-ref) and new-vs-old int8 the same; probe lines show
# the step times old and new.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"
stage_begin moe-ab 470

bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
BUN=/tmp/bun
OLD="DISPATCH_CUDA_FUSED_SILU=0,DISPATCH_CUDA_SMALL_M_HINT=64"  # the loops below take name:env (comma-separated):...

if stage "logits: 2-layer Qwen3-30B-A3B shape, ref / bf16 new / bf16 old / int8 new / int8 old" 120; then
  Q2="--shape qwen3-30b-a3b --layers 2 --batches 1,16,64 --prompt 512 --steps 6 --sample logits"
  for v in ref:DISPATCH_CUDA_REF_MOE=1:Q2 new::Q2 old:$OLD:Q2 int8-new::Q2:--int8 int8-old:$OLD:Q2:--int8; do
    IFS=: read -r name e args flag <<< "$v"
    env ${e//,/ } timeout "$(lim 30)" $BUN bench/serving/decode-probe.ts ${!args} $flag --dump-logits "$OUT/logits-$name.f32" \
      > "$OUT/ab-$name.jsonl" 2> "$OUT/ab-$name.log"
    echo "exit $?" >> "$OUT/ab-$name.log"
  done
  python3 - "$OUT" > "$OUT/ab.txt" 2>&1 <<'PY'
import sys, numpy as np
o = sys.argv[1]
def load(n):
    try:
        return np.fromfile(f"{o}/logits-{n}.f32", dtype=np.float32)
    except Exception as e:
        print(f"{n}: {e}")
for a, b in [("new", "ref"), ("old", "ref"), ("new", "old"), ("int8-new", "int8-old"), ("int8-new", "new")]:
    x, y = load(a), load(b)
    if x is None or y is None:
        continue
    if x.size != y.size or x.size == 0:
        print(f"{a} vs {b}: sizes {x.size} and {y.size}")
        continue
    d = np.abs(x - y)
    print(f"{a} vs {b}: n={x.size} max|{b}|={np.abs(y).max():.4f} max|diff|={d.max():.5f} "
          f"p99|diff|={np.quantile(d, 0.99):.5f} argmax {b}={y.argmax()} {a}={x.argmax()}")
PY
fi

# the last one changes one thing from "new": the int8 tile hint 64 (batch 64)
for v in bf16-new::1,64 bf16-old:$OLD:1,64 int8-new::1,64:--int8 int8-old:$OLD:1,64:--int8 \
    int8-hint64:DISPATCH_CUDA_SMALL_M_HINT=64:64:--int8; do
  IFS=: read -r name e batches flag <<< "$v"
  if stage "decode probe Qwen3-30B-A3B, $name" 60; then
    env ${e//,/ } timeout "$(lim 60)" $BUN bench/serving/decode-probe.ts \
      --shape qwen3-30b-a3b --batches $batches --prompt 512 --steps 24 --profile $flag > "$OUT/probe-$name.jsonl" 2> "$OUT/probe-$name.log"
    echo "exit $?" >> "$OUT/probe-$name.log"
  fi
done
stage_pack moe-ab.tgz
for f in "$OUT"/stages.log "$OUT"/ab.txt; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
for f in "$OUT"/ab-*.log "$OUT"/probe-*.log; do echo "--- $f"; tail -n 3 "$f"; done
for f in "$OUT"/probe-*.jsonl; do echo "--- $f"; cut -c1-300 "$f"; done
