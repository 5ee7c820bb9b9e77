# Steps shared by device_prefill.sh and device_decode.sh (sourced, not run): one device call under a
# deadline, logs in $W packed into $OUT/logs.tgz at the end, the library and its off-by-one mutation
# built side by side, correctness and the mutation run side by side, then the benchmark.
# Globals: OUT, W, t0, deadline, status (0 ok, 1 a check failed, 2 a build failed).

# dk_begin SECONDS: results folder, repository root, scratch folder, deadline SECONDS from now
dk_begin() {
  OUT=${OUT:-/tmp/out}
  mkdir -p "$OUT"
  cd "$(dirname "$0")/../.."
  W=$(mktemp -d)
  t0=$(date +%s)
  deadline=$(( t0 + $1 ))
  status=0
}

# seconds for the next step: its own limit, or what is left before the deadline (at least 5)
left() { local r=$(( deadline - $(date +%s) )); [ "$r" -gt "$1" ] && r=$1; [ "$r" -lt 5 ] && r=5; echo "$r"; }
pack() { tar -C "$W" -czf "$OUT/logs.tgz" . 2>/dev/null; echo "elapsed $(( $(date +%s) - t0 )) s; exit $status"; }

# dk_build LIMIT: the GPU line, kernels/build/libdispatch_kernels.so (build_capi.sh, at most LIMIT s) and at
# the same time the mutation objects, then kernels/build/libmut.so; on a failure sets status 2, packs, returns 2
dk_build() {
  # the device's copy of the tree may carry an older .git than the files: say so where they differ from its HEAD
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo ' + working-tree changes'), $(date -u '+%Y-%m-%d %H:%M') UTC"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  (mkdir -p kernels/build/mut && cd kernels/build/mut && rm -f ./*.o &&
   for s in ../../src/gemm/*.cu; do
     timeout 100 nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -DDK_MUTATE_EXPERT_OFF_BY_ONE \
       -c "$s" -o "$(basename "$s" .cu).o" &
   done; wait) > "$W/build_mut.log" 2>&1 &
  local p_mut_build=$!
  timeout "$(left "$1")" kernels/scripts/build_capi.sh > "$W/build.log" 2>&1 \
    || { echo "build failed or timed out (rc $?)"; tail -40 "$W/build.log"; status=2; pack; return $status; }
  wait $p_mut_build
  (cd kernels/build/mut && for o in ../capi/*.o; do b=$(basename "$o" .o); [ -e "../../src/gemm/$b.cu" ] || cp "$o" .; done &&
   timeout "$(left 60)" nvcc -shared -gencode=arch=compute_90a,code=sm_90a -o ../libmut.so ./*.o -lcudart_static) >> "$W/build_mut.log" 2>&1 \
    || { tail -20 "$W/build_mut.log"; status=2; pack; return $status; }
}

# dk_check MODE LIMIT TEST_CUT MUT_CUT: gpu_test.py --MODE and its mutation run (--expect-fail) side by side,
# each at most LIMIT s (capped by the deadline); prints their last lines cut to TEST_CUT / MUT_CUT characters
# and sets status 1 if either fails
dk_check() {
  local t_test p_test p_mut rc_test rc_mut
  t_test=$(left "$2")
  timeout "$t_test" python3 kernels/test/gpu_test.py --"$1" --json "$OUT/gpu_test.json" > "$W/gpu_test.log" 2>&1 &
  p_test=$!
  timeout "$t_test" python3 kernels/test/gpu_test.py --"$1" --lib kernels/build/libmut.so --expect-fail \
    --json "$OUT/mutation.json" > "$W/mutation.log" 2>&1 &
  p_mut=$!
  wait $p_test; rc_test=$?
  wait $p_mut; rc_mut=$?
  echo "gpu_test --$1 rc=$rc_test ($(( $(date +%s) - t0 )) s): $(tail -1 "$W/gpu_test.log" | cut -c1-"$3")"
  grep -E "^(FAIL|ERROR)" "$W/gpu_test.log" | head -15 | cut -c1-300
  echo "mutation rc=$rc_mut: $(tail -1 "$W/mutation.log" | cut -c1-"$4")"
  [ $rc_test -eq 0 ] || status=1
  [ $rc_mut -eq 0 ] || status=1
}

# dk_bench MODE LIMIT MARGIN: bench.py --MODE for at most LIMIT s (capped by the deadline), its own budget
# MARGIN s less, then the table of bench/kernels/MODE_report.py. DK_BENCH_ARGS: more bench.py arguments
# (e.g. "--tokens 2048,4096"), DK_REPORT_ARGS: more report arguments (e.g. "--min-tokens 2048").
dk_bench() {
  local t_bench
  t_bench=$(left "$2")
  # shellcheck disable=SC2086
  timeout "$t_bench" python3 bench/kernels/bench.py --"$1" --budget-s $(( t_bench > 30 ? t_bench - $3 : 5 )) \
    ${DK_BENCH_ARGS:-} --out "$OUT/bench.json" > "$W/bench.log" 2>&1
  echo "bench rc=$? ($(grep -c "T=" "$W/bench.log") rows, limit $t_bench s)"
  head -1 "$W/bench.log"
  grep -iE "error|Traceback" "$W/bench.log" | head -5 | cut -c1-300
  # shellcheck disable=SC2086
  [ -s "$OUT/bench.json" ] && timeout 15 python3 bench/kernels/"$1"_report.py "$OUT/bench.json" ${DK_REPORT_ARGS:-}
}
