#!/usr/bin/env bash
# Prefill-path run on the H200, one device call: about 2 minutes, at most about 3.5 (every GPU step under
# `timeout`, each capped by what is left of a 180 s deadline; give the call timeout_s 240):
#   1. build with nvcc -arch sm_90a (kernels/build/libdispatch_kernels.so) and, at the same time, the
#      off-by-one mutation build of the GEMMs (kernels/build/libmut.so); prints the wgmma kernels' ptxas
#      registers / spills for both epilogues (<false> direct, <true> staged);
#   2. GPU correctness of the contiguous (wgmma) kernel only, both epilogues (kernels/test/gpu_test.py
#      --prefill: every shape at T = 64-4096 uniform and zipf, one expert taking every row, ragged groups
#      around the 128-row tile, empty experts, rows outside every group left NaN, partial column chunks,
#      fused SiLU, the MoE layer; staged must give direct's bits, half tails those of 128-row tiles), and at the
#      same time the mutation run
#      (--prefill --expect-fail), which must fail in every GEMM family, the staged ones included;
#   3. benchmark rows T = 4096 and 16384 (DK_BENCH_ARGS="--tokens ..." for others) for all five shapes, both
#      projections, uniform and zipf routing (bench/kernels/bench.py --prefill): old = the staged epilogue with
#      every row tile 128 rows (before session 17), new = the library default (staged, half tails), fused SiLU
#      with each, the direct epilogue, torch._grouped_mm and dense cuBLAS of equal FLOPs; then the table and one
#      line of target counts (bench/kernels/prefill_report.py; DK_REPORT_ARGS="--min-tokens 1024" for all rows).
# Exit status: 0 only if both builds, every correctness check and the mutation check pass (the benchmark
# does not decide it). Usage (repository root): kernels/scripts/device_prefill.sh
# Results in $OUT (5 files): summary.txt (what this prints), bench.json, gpu_test.json, mutation.json, logs.tgz
set -uo pipefail
. "$(dirname "$0")/device_lib.sh"
# DK_PREFILL_S: the call's deadline in seconds (default 180), DK_PREFILL_BENCH_S: the benchmark's limit (75)
dk_begin "${DK_PREFILL_S:-180}"

main() {

dk_build 120 || return $status
echo "build: $(( $(date +%s) - t0 )) s; wgmma kernel <staged epilogue, swapped tails>: registers, spill bytes"
awk '/Compiling entry function/ && /grouped_gemm_contiguous_kernel/ { match($0, /ILb[01]ELb[01]E/); k = substr($0, RSTART + 3, 1) "," substr($0, RSTART + 7, 1); want = 1; next }
     want && /spill stores/ { sp = $5 }
     want && /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); printf "<%s>: %s/%s; ", k, substr($0, RSTART + 5, RLENGTH - 5), sp; want = 0 }' \
  kernels/build/capi/sm90_bf16_grouped_gemm_contiguous.log; echo

dk_check prefill 90 900 900

dk_bench prefill "${DK_PREFILL_BENCH_S:-75}" 20
pack
return $status
}

main 2>&1 | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
