#!/usr/bin/env bash
# Builds bench/ep/ep_bench (native-ep's NCCL and p2p backends + the harness) and bench/ep/nvlink_ceiling with nvcc; NCCL is dlopen'ed
# at run time, so only its header is needed here: the system one, else native-ep's declarations.
set -euo pipefail
cd "$(dirname "$0")/../.."
EP=model-server/native-ep
NCCL_INC=$( [ -f /usr/include/nccl.h ] && echo /usr/include || echo $EP/third_party/nccl )
OUT=${1:-bench/ep/build}
mkdir -p "$OUT"
nvcc -std=c++17 -O3 -gencode=arch=compute_90,code=sm_90 -I"$NCCL_INC" -I$EP/src \
  bench/ep/ep_bench.cu $EP/src/ep_kernels.cu $EP/src/ep_ll_tokens.cu $EP/src/ep_p2p_kernels.cu $EP/src/ep_nccl.cpp $EP/src/ep_p2p.cpp \
  $EP/src/nccl_loader.cpp \
  -o "$OUT/ep_bench" -ldl -lpthread
nvcc -std=c++17 -O3 -gencode=arch=compute_90,code=sm_90 -I$EP/src bench/ep/nvlink_ceiling.cu -o "$OUT/nvlink_ceiling"
echo "$OUT/ep_bench"
