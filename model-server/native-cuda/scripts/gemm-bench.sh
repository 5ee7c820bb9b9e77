#!/usr/bin/env bash
# Builds and runs scripts/gemm_bench.cu on the GPU machine: every dense GEMM path (GEMV, the
# legacy WMMA tiles, the skinny mma.sync GEMM in both variants, the stream GEMM, the TMA + wgmma
# skinny2 GEMM, the 128x128 and 128x256 tiles)
# checked against a reference kernel (edge shapes with bias and accumulate, then the model's
# shapes), then timed at
# T = 1, 8, 16, 32, 64, 512, 8192 for Qwen3-30B-A3B's dense shapes and the LM head. From the
# repository root:
#
#   bash model-server/native-cuda/scripts/gemm-bench.sh
#   bash model-server/native-cuda/scripts/gemm-bench.sh --splitk   # build and split K only (<= 90 s)
#   bash model-server/native-cuda/scripts/gemm-bench.sh --decode   # build and decode sizes only (<= 3 min)
#   bash model-server/native-cuda/scripts/gemm-bench.sh --prefill  # build, tiled vs wgmma at T > 64 (<= 2 min)
#
# --prefill: `gemm_bench --prefill-check` (GemmPath::Wgmma's first launches captured in a graph and
# replayed; Auto, Tiled and Wgmma at 128 and 256 wide tiles against the reference on ragged and model
# shapes up to T = 4100, 5 runs bit-identical), then `gemm_bench --prefill` at T = 512 (with the
# T > 64 edge shapes, every accumulate x bias), 2048 and 8192: q|k|v, o and the LM head (to T = 2048),
# the 128x128 mma.sync tiles against gemm_wgmma_tiled.cuh (DISPATCH_CUDA_GEMM_WGMMA's kernel) side by side.
#
# --decode: `gemm_bench --decode` (GemmPath::Skinny2's first launches captured in a graph and
# replayed; every T <= 64 path incl. Stream and Skinny2 with forced and automatic splits against the
# reference, 5 runs bit-identical), then the edge shapes and the model's shapes at T = 1, 4, 16, 64
# (`--quick`): single-launch us and the graph_us / pdl_us / W_TB/s columns side by side for the
# GEMVs, skinny, stream and skinny2 (DISPATCH_CUDA_GEMM_SKINNY2's kernel).
#
# The default run and --splitk first run `gemm_bench --splitk`: every split-K path (forced splits 2..8, ragged tiles,
# accumulate on and off) against the reference and repeated 5 times for identical bits, a CUDA
# graph replayed 3 times (the per-tile counters back at 0), and the deterministic reduction timed
# against DISPATCH_CUDA_GEMM_ATOMIC_SPLITK's atomics at T = 128..1024 (q|k|v, o, a 10944-wide dense
# MLP). --splitk then runs one quick correctness pass (T = 16, 64, 512) and stops.
#
# When .carry/bun.xz and .carry/cuda-build.tar.xz travel along (prepare-device.sh makes the
# latter), it then runs backend/cuda/gemm.test.ts with the addon, on the default paths, under
# DISPATCH_CUDA_GEMM_LEGACY=1, DISPATCH_CUDA_SKINNY_V2=0 (the skinny GEMM), =all (the stream
# GEMM at T <= 8 too), DISPATCH_CUDA_GEMM_SKINNY2=1 (skinny2 at every T <= 64) and
# DISPATCH_CUDA_GEMM_WGMMA=1 (gemm_wgmma_tiled.cuh at T > 64).
#
# Output goes to stdout (and to $OUT/gemm-bench.txt when $OUT is set). Exit status: 0 when every
# check passed, 1 on a mismatch, 2 on a build, CUDA or timeout failure. Each GPU run is limited
# to 60 s; the T groups run separately so one hang costs one group.
set -u
cd "$(dirname "$0")/.."
source scripts/harness-lib.sh
harness_init gemm-bench
harness_build_objects scripts/gemm_bench.cu scripts/gemm_bench_splitk.cu src/gemm.cu src/gemv_fast.cu
harness_gpu_info
run() { harness_run "gemm_bench $*" exit "$@"; }
if [ "${1:-}" = --decode ]; then
  run --decode
  run --quick --t 1,4
  run --quick --skip-edges --t 16,64
  if [ "$status" -eq 0 ]; then echo "gemm-bench --decode: PASS"; else echo "gemm-bench --decode: FAIL (status $status)"; fi
  exit $status
fi
if [ "${1:-}" = --prefill ]; then
  run --prefill-check
  run --prefill --t 512
  run --prefill --skip-edges --t 2048
  run --prefill --skip-edges --t 8192
  if [ "$status" -eq 0 ]; then echo "gemm-bench --prefill: PASS"; else echo "gemm-bench --prefill: FAIL (status $status)"; fi
  exit $status
fi
run --splitk
if [ "${1:-}" = --splitk ]; then
  run --quick --t 16,64,512
  if [ "$status" -eq 0 ]; then echo "gemm-bench --splitk: PASS"; else echo "gemm-bench --splitk: FAIL (status $status)"; fi
  exit $status
fi
run --t 1,8,16,32,64
run --skip-edges --t 512
run --skip-edges --quick --t 8192
if bash scripts/unpack-carry.sh 2>/dev/null; then  # the addon and Bun, where they were carried
  for env in DISPATCH_CUDA_GEMM_LEGACY=0 DISPATCH_CUDA_GEMM_LEGACY=1 DISPATCH_CUDA_SKINNY_V2=0 \
    DISPATCH_CUDA_SKINNY_V2=all DISPATCH_CUDA_GEMM_SKINNY2=1 DISPATCH_CUDA_GEMM_WGMMA=1; do
    echo "== gemm.test.ts ($env)"
    (cd .. && env "$env" timeout 90 /tmp/bun test src/backend/cuda/gemm.test.ts)
    rc=$?
    echo "== exit $rc"
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=1; fi
  done
fi
if [ "$status" -eq 0 ]; then echo "gemm-bench: PASS"; else echo "gemm-bench: FAIL (status $status)"; fi
exit $status
