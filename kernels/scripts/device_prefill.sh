#!/usr/bin/env bash
# Prefill-path run on the H200, one device call: about 2 minutes, at most about 3.5 (every GPU step under
# `timeout`, each capped by what is left of a 180 s deadline; give the call timeout_s 240):
#   1. build with nvcc -arch sm_90a (kernels/build/libdispatch_kernels.so) and, at the same time, the
#      off-by-one mutation build of the GEMMs (kernels/build/libmut.so); prints the wgmma kernels' ptxas
#      registers / spills for both epilogues (<false> direct, <true> staged);
#   2. GPU correctness of the contiguous (wgmma) kernel only, both epilogues (kernels/test/gpu_test.py
#      --prefill: every shape at T = 64-4096 uniform and zipf, one expert taking every row, ragged groups
#      around the 128-row tile, empty experts, rows outside every group left NaN, partial column chunks,
#      fused SiLU, the MoE layer; staged must give direct's bits), and at the same time the mutation run
#      (--prefill --expect-fail), which must fail in every GEMM family, the staged ones included;
#   3. benchmark rows T = 4096 and 16384 for all five shapes, both projections, uniform and zipf routing
#      (bench/kernels/bench.py --prefill): old = the direct epilogue (the library default), new = the
#      staged one, fused SiLU with each, torch._grouped_mm and dense cuBLAS of equal FLOPs; then the table
#      and one line of target counts (bench/kernels/prefill_report.py).
# Exit status: 0 only if both builds, every correctness check and the mutation check pass (the benchmark
# does not decide it). Usage (repository root): kernels/scripts/device_prefill.sh
# Results in $OUT (5 files): summary.txt (what this prints), bench.json, gpu_test.json, mutation.json, logs.tgz
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
W=$(mktemp -d)
t0=$(date +%s)
deadline=$(( t0 + 180 ))
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
timeout "$(left 120)" kernels/scripts/build_capi.sh > "$W/build.log" 2>&1 \
  || { echo "build failed or timed out (rc $?)"; tail -40 "$W/build.log"; status=2; pack; return $status; }
wait $p_mut_build
(cd kernels/build/mut && for o in ../capi/*.o; do b=$(basename "$o" .o); [ -e "../../src/gemm/$b.cu" ] || cp "$o" .; done &&
 timeout "$(left 60)" nvcc -shared -gencode=arch=compute_90a,code=sm_90a -o ../libmut.so ./*.o -lcudart_static) >> "$W/build_mut.log" 2>&1 \
  || { tail -20 "$W/build_mut.log"; status=2; pack; return $status; }
echo "build: $(( $(date +%s) - t0 )) s; wgmma kernel <staged epilogue>: registers, spill bytes"
awk '/Compiling entry function/ && /grouped_gemm_contiguous_kernel/ { match($0, /ILb[01]E/); k = substr($0, RSTART + 3, 1); want = 1; next }
     want && /spill stores/ { sp = $5 }
     want && /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); printf "<%s>: %s/%s; ", k, substr($0, RSTART + 5, RLENGTH - 5), sp; want = 0 }' \
  kernels/build/capi/sm90_bf16_grouped_gemm_contiguous.log; echo

t_test=$(left 90)
timeout "$t_test" python3 kernels/test/gpu_test.py --prefill --json "$OUT/gpu_test.json" > "$W/gpu_test.log" 2>&1 &
p_test=$!
timeout "$t_test" python3 kernels/test/gpu_test.py --prefill --lib kernels/build/libmut.so --expect-fail \
  --json "$OUT/mutation.json" > "$W/mutation.log" 2>&1 &
p_mut=$!
wait $p_test; rc_test=$?
wait $p_mut; rc_mut=$?
echo "gpu_test --prefill rc=$rc_test ($(( $(date +%s) - t0 )) s): $(tail -1 "$W/gpu_test.log" | cut -c1-900)"
grep -E "^(FAIL|ERROR)" "$W/gpu_test.log" | head -15 | cut -c1-300
echo "mutation rc=$rc_mut: $(tail -1 "$W/mutation.log" | cut -c1-900)"
[ $rc_test -eq 0 ] || status=1
[ $rc_mut -eq 0 ] || status=1

t_bench=$(left 75)
timeout "$t_bench" python3 bench/kernels/bench.py --prefill --budget-s $(( t_bench > 30 ? t_bench - 20 : 5 )) \
  --out "$OUT/bench.json" > "$W/bench.log" 2>&1
echo "bench rc=$? ($(grep -c "T=" "$W/bench.log") rows, limit $t_bench s)"
head -1 "$W/bench.log"
grep -iE "error|Traceback" "$W/bench.log" | head -5 | cut -c1-300
[ -s "$OUT/bench.json" ] && timeout 15 python3 bench/kernels/prefill_report.py "$OUT/bench.json"
pack
return $status
}

main 2>&1 | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
