#!/usr/bin/env bash
# On a multi-GPU machine (device kinds nvidia-h200-x2 / -x4 / -x8), from the repository root:
#   bench/ep/run.sh                 # every power of two up to the GPUs present, backends nccl and p2p
#   BACKENDS=p2p bench/ep/run.sh    # one backend
# Writes $OUT/ep-<N>gpu-<shape>-<backend>.json (OUT defaults to bench/ep/results) and prints the tables.
# Shapes: DeepEP's published setting (H 7168, 256 experts, top-8: DeepSeek-V3) and
# deepseek-moe-16b (H 2048, 64 experts, top-6), at 128 and 4096 tokens per rank.
# For one timed run with a bounded wall clock and the NVLink ceiling, use bench/ep/device.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-bench/ep/results}
BACKENDS=${BACKENDS:-nccl p2p}
mkdir -p "$OUT"
BIN=$(bench/ep/build.sh bench/ep/build | tail -1)
GPUS=$(nvidia-smi -L | wc -l)
nvidia-smi topo -m > "$OUT/topo.txt" || true
for n in 2 4 8; do
  [ "$n" -le "$GPUS" ] || continue
  for b in $BACKENDS; do
    "$BIN" --backend "$b" --gpus "$n" --hidden 7168 --experts 256 --topk 8 --tokens 128,4096 --iters 30 --json "$OUT/ep-${n}gpu-dsv3-$b.json"
    "$BIN" --backend "$b" --gpus "$n" --hidden 2048 --experts 64 --topk 6 --tokens 128,4096 --iters 30 --json "$OUT/ep-${n}gpu-dsmoe16b-$b.json"
  done
done
