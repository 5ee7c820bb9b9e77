#!/usr/bin/env bash
# A kernel timeline of decode steps on the GPU machine: the decode probe with
# native-cuda/tools/kernel_trace.cpp preloaded (CUPTI's activity API; that machine has no Nsight Systems), so
# every kernel of a replayed CUDA graph shows with its start and end, PDL overlap included. Writes
# $OUT/timeline.tgz: kernel-trace.csv and the probe's output; bench/serving/timeline_report.py reads the CSV.
#
#   run(command='OUT=$OUT bash model-server/native-cuda/scripts/timeline.sh "--shape qwen3-30b-a3b --batches 1 --prompt 512 --steps 12"',
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
# Extra environment for the probe: TIMELINE_ENV="VAR=v VAR2=w". The probe also runs once without the tracer, so
# the step time it perturbs can be compared.
set -u
FINAL_OUT=${OUT:-/tmp/timeline-out}
WORK=/tmp/timeline
rm -rf "$WORK"
mkdir -p "$WORK" "$FINAL_OUT"
bash model-server/native-cuda/scripts/unpack-carry.sh > /dev/null || exit 1
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUPTI=$(ls "$CUDA_HOME"/lib64/libcupti.so "$CUDA_HOME"/extras/CUPTI/lib64/libcupti.so "$CUDA_HOME"/targets/*/lib/libcupti.so 2>/dev/null | head -1)
[ -n "$CUPTI" ] || { echo "timeline: no libcupti.so under $CUDA_HOME" >&2; exit 3; }
INC=$(dirname "$(ls "$CUDA_HOME"/include/cupti.h "$CUDA_HOME"/extras/CUPTI/include/cupti.h "$CUDA_HOME"/targets/*/include/cupti.h 2>/dev/null | head -1)")
g++ -O2 -shared -fPIC -I"$INC" -I"$CUDA_HOME/include" model-server/native-cuda/tools/kernel_trace.cpp \
  -L"$(dirname "$CUPTI")" -lcupti -lpthread -Wl,-rpath,"$(dirname "$CUPTI")" -o "$WORK/ktrace.so" || exit 4
echo "timeline: tracer built against $CUPTI"
# shellcheck disable=SC2086
env ${TIMELINE_ENV:-} timeout 120 /tmp/bun bench/serving/decode-probe.ts $1 > "$WORK/plain.out" 2> "$WORK/plain.log"
echo "timeline: untraced probe exit $?"
# shellcheck disable=SC2086
env ${TIMELINE_ENV:-} KERNEL_TRACE_OUT="$WORK/kernel-trace.csv" LD_PRELOAD="$WORK/ktrace.so" timeout 180 \
  /tmp/bun bench/serving/decode-probe.ts $1 > "$WORK/probe.out" 2> "$WORK/probe.log"
echo "timeline: traced probe exit $?; $(wc -l < "$WORK/kernel-trace.csv") kernel lines"
grep -h '"decodeStepMs"' "$WORK/plain.out" "$WORK/probe.out" | sed -E 's/.*"batch":([0-9]+).*"decodeStepMs":([0-9.]+).*/  batch \1: \2 ms per step/'
rm -f "$WORK/ktrace.so"
tar -C "$WORK" -czf "$FINAL_OUT/timeline.tgz" .
