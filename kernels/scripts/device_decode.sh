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
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
W=$(mktemp -d)
t0=$(date +%s)
deadline=$(( t0 + 215 ))
status=0
# seconds for the next step: its own limit, or what is left before the deadline (at least 5)
left() { local r=$(( deadline - $(date +%s) )); [ "$r" -gt "$1" ] && r=$1; [ "$r" -lt 5 ] && r=5; echo "$r"; }
pack() { tar -C "$W" -czf "$OUT/logs.tgz" . 2>/dev/null; echo "elapsed $(( $(date +%s) - t0 )) s; exit $status"; }

main() {

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M') UTC"
timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
(mkdir -p kernels/build/mut && cd kernels/build/mut && rm -f ./*.o &&
 for s in ../../src/gemm/*.cu; do
   timeout 100 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -DDK_MUTATE_EXPERT_OFF_BY_ONE \
     -c "$s" -o "$(basename "$s" .cu).o" &
 done; wait) > "$W/build_mut.log" 2>&1 &
p_mut_build=$!
timeout "$(left 150)" kernels/scripts/build_capi.sh > "$W/build.log" 2>&1 \
  || { echo "build failed or timed out (rc $?)"; tail -40 "$W/build.log"; status=2; pack; return $status; }
wait $p_mut_build
(cd kernels/build/mut && for o in ../capi/*.o; do b=$(basename "$o" .o); [ -e "../../src/gemm/$b.cu" ] || cp "$o" .; done &&
 timeout "$(left 60)" nvcc -shared -gencode=arch=compute_90a,code=sm_90a -o ../libmut.so ./*.o -lcudart_static) >> "$W/build_mut.log" 2>&1 \
  || { tail -20 "$W/build_mut.log"; status=2; pack; return $status; }
grep -h -E "registers|spill" kernels/build/capi/grouped_gemm_small_m*.log > "$W/ptxas_small_m.txt"
echo "build: $(( $(date +%s) - t0 )) s; small-M kernels <int8, NT, depth(, row blocks per item)>: registers, spill bytes"
awk '/Compiling entry function/ && /grouped_gemm_small_m(_pair)?_kernel/ {
       name = /_pair_kernel/ ? "pair" : "legacy"; match($0, /ILb[01]E(Li[0-9]E)+(Lb[01]E)?/); k = substr($0, RSTART + 3, RLENGTH - 4)
       gsub(/ELi/, ",", k); gsub(/ELb/, ",", k); want = 1; next }
     want && /spill stores/ { sp = $5 }
     want && /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); printf "%s %s: %s/%s; ", name, k, substr($0, RSTART + 5, RLENGTH - 5), sp; want = 0 }' \
  kernels/build/capi/grouped_gemm_small_m.log; echo

t_test=$(left 110)
timeout "$t_test" python3 kernels/test/gpu_test.py --decode --json "$OUT/gpu_test.json" > "$W/gpu_test.log" 2>&1 &
p_test=$!
timeout "$t_test" python3 kernels/test/gpu_test.py --decode --lib kernels/build/libmut.so --expect-fail \
  --json "$OUT/mutation.json" > "$W/mutation.log" 2>&1 &
p_mut=$!
wait $p_test; rc_test=$?
wait $p_mut; rc_mut=$?
echo "gpu_test --decode rc=$rc_test ($(( $(date +%s) - t0 )) s): $(tail -1 "$W/gpu_test.log" | cut -c1-700)"
grep -E "^(FAIL|ERROR)" "$W/gpu_test.log" | head -15 | cut -c1-300
echo "mutation rc=$rc_mut: $(tail -1 "$W/mutation.log" | cut -c1-1000)"
[ $rc_test -eq 0 ] || status=1
[ $rc_mut -eq 0 ] || status=1

t_chain=$(left 45)
timeout "$t_chain" python3 bench/kernels/pdl_chain.py --budget-s $(( t_chain > 20 ? t_chain - 15 : 5 )) \
  --out "$OUT/pdl_chain.json" > "$W/pdl_chain.log" 2>&1
echo "pdl chain rc=$? ($(( $(date +%s) - t0 )) s); us per chain, off = no PDL (default), on = g_small_m_pdl_mode 1:"
grep -vE "^\s*$" "$W/pdl_chain.log" | cut -c1-220 | tail -40

if [ "${DECODE_BENCH:-1}" = 0 ]; then echo "bench.py --decode skipped (DECODE_BENCH=0)"; pack; return $status; fi
t_bench=$(left 95)
timeout "$t_bench" python3 bench/kernels/bench.py --decode --budget-s $(( t_bench > 30 ? t_bench - 25 : 5 )) \
  --out "$OUT/bench.json" > "$W/bench.log" 2>&1
echo "bench rc=$? ($(grep -c "T=" "$W/bench.log") rows, limit $t_bench s)"
head -1 "$W/bench.log"
grep -iE "error|Traceback" "$W/bench.log" | head -5 | cut -c1-300
[ -s "$OUT/bench.json" ] && timeout 15 python3 bench/kernels/decode_report.py "$OUT/bench.json"
pack
return $status
}

main 2>&1 | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
