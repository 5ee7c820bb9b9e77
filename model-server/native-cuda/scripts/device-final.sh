#!/usr/bin/env bash
# The session's closing GPU run of the CUDA backend, one device call (about 6 minutes):
# the kernel-level checks (decode attention, GEMV), then device-check.sh (tests, golden, greedy
# agreement, decode probes, serving). Every part is bounded by `timeout`; results land in $OUT as
# at most 8 files: attention-check.txt, gemv-check.txt, cuda-check.tgz and final.log.
#
#   bash model-server/native-cuda/scripts/prepare-device.sh
#   run(command="bash model-server/native-cuda/scripts/device-final.sh", timeout_s=560,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
set -u
OUT=${OUT:-/tmp/device-final}
mkdir -p "$OUT"
cd "$(dirname "$0")/../../.."
{
  echo "== attention-check"
  timeout 100 bash model-server/native-cuda/scripts/attention-check.sh > "$OUT/attention-check.txt" 2>&1
  echo "attention-check exit $?"
  if [ -f model-server/native-cuda/scripts/gemv-check.sh ]; then
    echo "== gemv-check"
    timeout 100 bash model-server/native-cuda/scripts/gemv-check.sh > "$OUT/gemv-check.txt" 2>&1
    echo "gemv-check exit $?"
  fi
  echo "== device-check"
  OUT="$OUT" BUDGET_S=${BUDGET_S:-330} bash model-server/native-cuda/scripts/device-check.sh
  echo "device-check exit $?"
} 2>&1 | tee "$OUT/final.log" | tail -c 9000
grep -hE "ALL OK|FAIL|mismatch|PASS" "$OUT/attention-check.txt" "$OUT/gemv-check.txt" 2>/dev/null | tail -8
