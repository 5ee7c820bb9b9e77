#!/usr/bin/env bash
# One call on the GPU machine (no carry needed): builds bench/kernels/tma_stream.cu and streams 4 GiB
# of int8 rows through every TMA box shape it knows, at K = 2048 (Qwen3-30B-A3B gate|up rows) and
# K = 768 (its down rows), one JSON line per pattern -> $OUT/tma-stream.jsonl.
#   run(command="bash bench/kernels/tma-stream.sh")
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/tma_stream bench/kernels/tma_stream.cu || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
for K in 2048 768; do timeout 120 /tmp/tma_stream "$K" 4; done | tee "$OUT/tma-stream.jsonl"
