#!/usr/bin/env bash
# Decode-path run on the H200, one device call, about 2-3 minutes expected (every step under `timeout`;
# worst case about 8 minutes if every step runs into its limit, so give the call timeout_s 600):
#   1. build with nvcc -arch sm_90a (kernels/build/libdispatch_kernels.so) and the off-by-one mutation
#      build (both grouped-GEMM kernels read expert e+1's weights; kernels/build/libmut.so);
#   2. GPU correctness, decode subset (kernels/test/gpu_test.py --decode), and at the same time the
#      mutation run, which must fail in every GEMM kernel family;
#   3. benchmark rows T = 1, 8, 64 for all five shapes, both projections, uniform and zipf routing:
#      bf16 small-M stream (default) / legacy / stream+PDL, int8 stream / legacy / PDL, the wgmma kernel,
#      torch._grouped_mm, and the HBM read ceiling (bench/kernels/bench.py --decode).
# Exit status: 0 only if the build, every correctness check and the mutation check pass.
# Usage (repository root): kernels/scripts/device_decode.sh        results in $OUT (5 files):
#   summary.txt (what this prints), bench.json, gpu_test.json, mutation.json, logs.tgz
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
W=$(mktemp -d)
t0=$(date +%s)
status=0
pack() { tar -C "$W" -czf "$OUT/logs.tgz" . 2>/dev/null; echo "elapsed $(( $(date +%s) - t0 )) s; exit $status"; }

main() {

timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 120 kernels/scripts/build_capi.sh > "$W/build.log" 2>&1 || { tail -40 "$W/build.log"; status=2; pack; return $status; }
(mkdir -p kernels/build/mut && cd kernels/build/mut && rm -f ./*.o &&
 for s in ../../src/gemm/*.cu; do
   timeout 100 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -DDK_MUTATE_EXPERT_OFF_BY_ONE \
     -c "$s" -o "$(basename "$s" .cu).o" &
 done; wait
 for o in ../capi/*.o; do b=$(basename "$o" .o); [ -e "../../src/gemm/$b.cu" ] || cp "$o" .; done
 nvcc -shared -gencode=arch=compute_90a,code=sm_90a -o ../libmut.so ./*.o -lcudart_static) > "$W/build_mut.log" 2>&1 \
  || { tail -20 "$W/build_mut.log"; status=2; pack; return $status; }
grep -h -E "registers|spill" kernels/build/capi/grouped_gemm_small_m.log > "$W/ptxas_small_m.txt"
echo "build: $(( $(date +%s) - t0 )) s; small-M stream kernels <int8, NT, depth>: registers, spill bytes"
awk '/Compiling entry function/ && /stream_kernel/ { match($0, /ILb[01]ELi[0-9]ELi[0-9]/); k = substr($0, RSTART + 3, RLENGTH - 3); gsub(/ELi/, ",", k); want = 1; next }
     want && /spill stores/ { sp = $5 }
     want && /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); printf "%s: %s regs %s spill; ", k, substr($0, RSTART + 5, RLENGTH - 5), sp; want = 0 }' \
  kernels/build/capi/grouped_gemm_small_m.log; echo

timeout 100 python3 kernels/test/gpu_test.py --decode --json "$OUT/gpu_test.json" > "$W/gpu_test.log" 2>&1 &
p_test=$!
timeout 100 python3 kernels/test/gpu_test.py --decode --lib kernels/build/libmut.so --expect-fail \
  --json "$OUT/mutation.json" > "$W/mutation.log" 2>&1 &
p_mut=$!
wait $p_test; rc_test=$?
wait $p_mut; rc_mut=$?
echo "gpu_test --decode rc=$rc_test: $(tail -1 "$W/gpu_test.log" | cut -c1-600)"
grep -E "^(FAIL|ERROR)" "$W/gpu_test.log" | head -15 | cut -c1-300
echo "mutation rc=$rc_mut: $(tail -1 "$W/mutation.log" | cut -c1-900)"
[ $rc_test -eq 0 ] || status=1
[ $rc_mut -eq 0 ] || status=1

timeout 130 python3 bench/kernels/bench.py --decode --budget-s 100 --out "$OUT/bench.json" > "$W/bench.log" 2>&1
echo "bench rc=$? ($(grep -c "T=" "$W/bench.log") rows)"
head -1 "$W/bench.log"
grep -iE "error|Traceback" "$W/bench.log" | head -5 | cut -c1-300
[ -s "$OUT/bench.json" ] && python3 bench/kernels/decode_report.py "$OUT/bench.json"
pack
return $status
}

main 2>&1 | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
