#!/usr/bin/env bash
# Decode probes of the CUDA backend under several environment switch settings, one device call
# (same carry as device-check.sh). Each variant is name:VAR=v,VAR2=w (empty after the colon:
# the defaults); every probe gets the same arguments. One line per batch per variant.
#
#   run(command='bash model-server/native-cuda/scripts/env-ab.sh "--shape qwen3-30b-a3b --batches 1,64 --prompt 512 --steps 24" default: cluster-off:DISPATCH_CUDA_ATTN_CLUSTER=0',
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
set -u
FINAL_OUT=${OUT:-/tmp/env-ab-out}
OUT=/tmp/env-ab
rm -rf "$OUT"
mkdir -p "$OUT" "$FINAL_OUT"
bash model-server/native-cuda/scripts/unpack-carry.sh > /dev/null || exit 1
ARGS=$1
shift
for v in "$@"; do
  IFS=: read -r name e <<< "$v"
  # shellcheck disable=SC2086
  env ${e//,/ } timeout 60 /tmp/bun bench/serving/decode-probe.ts $ARGS > "$OUT/$name.jsonl" 2> "$OUT/$name.log"
  echo "== $name (${e:-defaults}) exit $?"
  grep '"decodeStepMs"' "$OUT/$name.jsonl" | sed -E 's/.*"batch":([0-9]+).*"prefillTokS":([0-9]+).*"decodeStepMs":([0-9.]+),"decodeTokS":([0-9]+),"rooflineTokS":([0-9]+),"ofRoofline":([0-9.]+).*/  batch \1: prefill \2 tok\/s; decode \3 ms, \4 tok\/s, roofline \5, share \6/'
  grep -o '"idsHash":"[0-9a-f]*"' "$OUT/$name.jsonl" | paste -sd' ' | sed 's/^/  /'
done
tar -C "$OUT" -czf "$FINAL_OUT/env-ab.tgz" .
