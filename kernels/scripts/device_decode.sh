#!/usr/bin/env bash
# Decode-path run on the H200, one device call: about 2-3 minutes, at most about 4 (every GPU step under
# `timeout`, each capped by what is left of a 215 s deadline; give the call timeout_s 300):
#   1. build with nvcc -arch sm_90a (kernels/build/libdispatch_kernels.so) and, at the same time, the
#      off-by-one mutation build (both grouped-GEMM kernels read expert e+1's weights; kernels/build/libmut.so);
#   2. GPU correctness, decode subset (kernels/test/gpu_test.py --decode: stream, legacy and pair small-M
#      schedules, bf16 and int8), and at the same time the mutation run, which must fail in every GEMM family;
#   3. the MoE expert chain producer -> gate|up -> down with and without PDL on the legacy small-M kernel
#      (bench/kernels/pdl_chain.py: off / on / waitfirst, T = 1, 8, 64, five shapes, bf16 and int8, at most 45 s);
#   4. benchmark rows T = 1, 8, 64 for all five shapes, both projections, uniform and zipf routing
#      (bench/kernels/bench.py --decode): old = the legacy small-M schedule (the library default), new = the
#      pair schedule (two row blocks per warp item, L2 prefetch when the weights fit), each in bf16 and int8;
#      the pair schedule without prefetch (T <= 8), int8 legacy at depth 4, the wgmma kernel,
#      torch._grouped_mm and the HBM read ceiling; then the table (bench/kernels/decode_report.py) with the
#      fastest schedule per row.
# Exit status: 0 only if both builds, every correctness check and the mutation check pass (the benchmark
# does not decide it). Usage (repository root): kernels/scripts/device_decode.sh; DECODE_BENCH=0 skips step 4
# (the 60-row benchmark; the PDL chain of step 3 still runs).
# Results in $OUT (6 files): summary.txt (what this prints), bench.json, pdl_chain.json, gpu_test.json, mutation.json,
# logs.tgz
set -uo pipefail
. "$(dirname "$0")/device_lib.sh"
dk_begin 215

main() {

dk_build 150 || return $status
grep -h -E "registers|spill" kernels/build/capi/grouped_gemm_small_m*.log > "$W/ptxas_small_m.txt"
echo "build: $(( $(date +%s) - t0 )) s; small-M kernels <int8, NT, depth(, row blocks per item)>: registers, spill bytes"
awk '/Compiling entry function/ && /grouped_gemm_small_m(_pair)?_kernel/ {
       name = /_pair_kernel/ ? "pair" : "legacy"; match($0, /ILb[01]E(Li[0-9]E)+(Lb[01]E)?/); k = substr($0, RSTART + 3, RLENGTH - 4)
       gsub(/ELi/, ",", k); gsub(/ELb/, ",", k); want = 1; next }
     want && /spill stores/ { sp = $5 }
     want && /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); printf "%s %s: %s/%s; ", name, k, substr($0, RSTART + 5, RLENGTH - 5), sp; want = 0 }' \
  kernels/build/capi/grouped_gemm_small_m.log; echo

dk_check decode 110 700 1000

t_chain=$(left 45)
timeout "$t_chain" python3 bench/kernels/pdl_chain.py --budget-s $(( t_chain > 20 ? t_chain - 15 : 5 )) \
  --out "$OUT/pdl_chain.json" > "$W/pdl_chain.log" 2>&1
echo "pdl chain rc=$? ($(( $(date +%s) - t0 )) s); us per chain, off = no PDL (default), on = g_small_m_pdl_mode 1:"
grep -vE "^\s*$" "$W/pdl_chain.log" | cut -c1-220 | tail -40

if [ "${DECODE_BENCH:-1}" = 0 ]; then echo "bench.py --decode skipped (DECODE_BENCH=0)"; pack; return $status; fi
dk_bench decode 95 25
pack
return $status
}

main 2>&1 | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
