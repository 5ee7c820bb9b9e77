#!/usr/bin/env bash
# The int8-expert path end to end in ONE device call (a cold call costs ~60-70 s of the session's device
# time before the command starts, so the kernel and the model checks share it):
#   1. kernels/scripts/device_w8.sh: the W8A16 GEMM's build, gpu_test.py --w8, the mutation check and
#      bench/kernels/w8a16_bench.py (W8_BENCH_ARGS, default T = 1-64 and 256 on every model); with
#      W8_BENCH2_ARGS a second benchmark run on the same build (e.g. prefill sizes), w8a16_bench2.json;
#   2. the CUDA backend's tests (model-server/src/backend/cuda, the golden and sampling tests);
#   3. model-server/native-cuda/scripts/int8-check.sh (logits: new int8 vs the old int8 path vs bf16;
#      probes at INT8_BATCHES, default 16,64; SKIP_INT8_CHECK=1 leaves it out); with
#      INT8_AB="PROBE ARGS|name:VAR=v name2:..." also env-ab.sh's decode probes under each setting;
#   4. bench/serving/device-serve-check.sh with int8 experts through the gateway (SERVE_BUDGET_S, 110),
#      once per SERVE_ENVS entry ("name:VAR=v,VAR2=w;name2:", default one run with the defaults;
#      SERVE_ENVS=none: no serving run).
# Prepare the carry first (the addon and bundles from HEAD), then:
#   bash model-server/native-cuda/scripts/prepare-device.sh
#   run(command="bash bench/int8-full-check.sh", timeout_s=600, carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
# Results land in $OUT as one results.tgz (the device tool returns ~8 files) plus this log's summary lines.
set -u
FINAL_OUT=${OUT:-/tmp/int8-full-check-out}
R=/tmp/int8-full-results
rm -rf "$R"; mkdir -p "$R" "$FINAL_OUT"
t0=$(date +%s)
stamp() { echo "[int8-full-check] $1 at +$(( $(date +%s) - t0 )) s"; }

stamp "kernels"
W=/tmp/int8-full-w8
rm -rf "$W"; mkdir -p "$W"
OUT="$W" W8_BENCH_ARGS=${W8_BENCH_ARGS:---tokens 1,8,16,32,64,256 --budget-s 200} BENCH_TAIL=0 \
  bash kernels/scripts/device_w8.sh 2>&1 | grep -vE "registers|spill" | cut -c1-200
python3 bench/kernels/w8a16_summary.py "$W/w8a16_bench.json" 2>&1 | cut -c1-400
if [ -n "${W8_BENCH2_ARGS:-}" ]; then
  stamp "kernels, second benchmark"
  # shellcheck disable=SC2086
  timeout ${BENCH2_TIMEOUT:-240} python3 bench/kernels/w8a16_bench.py --out "$W/w8a16_bench2.json" $W8_BENCH2_ARGS \
    > "$W/w8a16_bench2.log" 2>&1; echo "bench2 rc=$?"
  python3 bench/kernels/w8a16_summary.py "$W/w8a16_bench2.json" 2>&1 | cut -c1-400
fi
tar -C "$W" -czf "$R/w8.tgz" .

stamp "CUDA tests"
bash model-server/native-cuda/scripts/unpack-carry.sh > /dev/null || exit 1
(cd model-server && timeout 200 /tmp/bun test src/backend/cuda src/model/cuda-golden.test.ts src/model/cuda-sampling.test.ts) \
  > "$R/cuda-tests.txt" 2>&1
echo "cuda tests exit $?: $(grep -E '^ *[0-9]+ (pass|fail)' "$R/cuda-tests.txt" | tr -s ' \n' ' ')"

mkdir -p "$R/int8"
if [ -z "${SKIP_INT8_CHECK:-}" ]; then
  stamp "int8-check"
  OUT="$R/int8" INT8_BATCHES=${INT8_BATCHES:-16,64} timeout 300 bash model-server/native-cuda/scripts/int8-check.sh 2>&1 | tail -12
fi
if [ -n "${INT8_AB:-}" ]; then
  stamp "env A/B probes"
  IFS='|' read -r ab_args ab_variants <<< "$INT8_AB"
  # shellcheck disable=SC2086
  OUT="$R/int8" timeout 300 bash model-server/native-cuda/scripts/env-ab.sh "$ab_args" $ab_variants 2>&1 | tail -40
fi

IFS=';' read -ra SERVE_VARIANTS <<< "${SERVE_ENVS:-default:}"
[ "${SERVE_ENVS:-}" = none ] && SERVE_VARIANTS=()
for v in "${SERVE_VARIANTS[@]}"; do
  IFS=: read -r name e <<< "$v"
  stamp "serving ($name: ${e:-defaults})"
  mkdir -p "$R/serve-$name"
  # shellcheck disable=SC2086
  env ${e//,/ } OUT="$R/serve-$name" SERVE_RUNS="${SERVE_RUNS:---shape qwen3-30b-a3b --int8 --targets gateway}" \
    SERVE_BUDGET_S="${SERVE_BUDGET_S:-110}" bash bench/serving/device-serve-check.sh 2>&1 | tail -${SERVE_TAIL:-8}
done
tar -C "$R" -czf "$FINAL_OUT/results.tgz" .
stamp "done"
