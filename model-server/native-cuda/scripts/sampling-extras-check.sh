#!/usr/bin/env bash
# Penalties and top log-probabilities on the GPU (sampling_extras.cuh), one device call (carry as device-check.sh):
# the bundled GPU test (host references at 151,936 ids, a chained input token, the engine over the runner), the
# CUDA tests that share the sampler, then decode probes at the Qwen3-30B-A3B shape: plain greedy against greedy with
# frequency / presence penalties and top-20 log-probabilities, overlapped; and the penalized run with --overlap both
# (sameIdsAsPlain: the chained steps count their input token on the GPU, so they pick the plain loop's ids).
#
#   run(command="bash model-server/native-cuda/scripts/sampling-extras-check.sh", timeout_s=420,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
set -u
OUT=${OUT:-/tmp/sampling-extras-out}
mkdir -p "$OUT"
bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
BUN=/tmp/bun
B=model-server/native-cuda/build/bundle
timeout 150 $BUN test ./$B/cuda-sampling-extras.test.js > "$OUT/extras-test.log" 2>&1
echo "exit $?" >> "$OUT/extras-test.log"
(cd model-server && timeout 150 $BUN test src/backend/cuda src/model/cuda-golden.test.ts src/model/cuda-sampling.test.ts src/model/cuda-overlap.test.ts) > "$OUT/cuda-tests.log" 2>&1
echo "exit $?" >> "$OUT/cuda-tests.log"
timeout 60 $BUN test ./$B/engine-cuda.test.js > "$OUT/engine-cuda.log" 2>&1
echo "exit $?" >> "$OUT/engine-cuda.log"
ARGS="--shape qwen3-30b-a3b --batches 1,64 --prompt 512 --steps 32"
PEN="--frequency-penalty 0.5 --presence-penalty 0.5 --top-logprobs 20"
probe() { # name, args...
  local name=$1; shift
  timeout 90 $BUN bench/serving/decode-probe.ts "$@" > "$OUT/$name.jsonl" 2> "$OUT/$name.log"
  echo "exit $?" >> "$OUT/$name.log"
}
probe plain $ARGS --overlap 1
# shellcheck disable=SC2086
probe extras $ARGS --overlap 1 $PEN
# shellcheck disable=SC2086
probe extras-both $ARGS --overlap both $PEN
probe plain-again $ARGS --overlap 1
for f in extras-test cuda-tests engine-cuda; do echo "== $f"; grep -E "^\(fail\)|\[sampling-extras\]| pass$| fail$| skip$|^exit" "$OUT/$f.log"; done
for f in plain extras extras-both plain-again; do
  echo "== $f"
  grep '"decodeStepMs"' "$OUT/$f.jsonl" | sed -E 's/.*"batch":([0-9]+).*"decodeStepMs":([0-9.]+),"decodeTokS":([0-9]+).*"overlap":(true|false).*"idsHash":"([0-9a-f]+)"(,"sameIdsAsPlain":"([0-9\/]+)")?.*/  batch \1 overlap \4: \2 ms, \3 tok\/s, ids \5 \7/'
done
