#!/usr/bin/env bash
# Runs the decode probe several times under each environment variant, each run under its own time limit, and says
# which variants ever hang: for a schedule that passes the kernel-level checks but may deadlock in the model (session
# 25: the persistent prefill attention with its rounds dealt alternately hung the probe twice, docs/cuda-backend.md).
# From the repository root on the GPU machine, after unpack-carry.sh (Bun in /tmp/bun, the addon built):
#
#   run(command='OUT=$OUT bash model-server/native-cuda/scripts/hang-check.sh "--shape qwen3-30b-a3b --batches 64
#       --prompt 512 --steps 6" "grid:DISPATCH_CUDA_FLASH_PERSISTENT=1" "items:DISPATCH_CUDA_FLASH_PERSISTENT=0"')
#
# A variant is NAME:ENV as in prefill-ab.sh. HANG_RUNS runs per variant (default 4), interleaved round by round;
# HANG_LIMIT_S seconds per run (default 60; a healthy run of the line above takes well under that). A run past its
# limit is killed with its process group (so the next run starts on an idle GPU) and counted as a hang. Prints one line
# per run (exit, prefill tokens/s, ids hash) and a summary line per variant; writes $OUT/hang-check.txt. Exit status: 0
# when no run hung or failed, 1 otherwise, 2 on bad arguments. PROBE_CMD replaces the probe (tests).
set -u
[ $# -ge 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
cd "$(dirname "$0")/../../.."
FINAL_OUT=${OUT:-/tmp/hang-check-out}
mkdir -p "$FINAL_OUT"
RUNS=${HANG_RUNS:-4}
LIMIT=${HANG_LIMIT_S:-60}
PROBE=${PROBE_CMD:-/tmp/bun bench/serving/decode-probe.ts}
[[ "$RUNS" =~ ^[1-9][0-9]*$ && "$LIMIT" =~ ^[1-9][0-9]*$ ]] || { echo "hang-check: HANG_RUNS and HANG_LIMIT_S must be positive integers" >&2; exit 2; }

main() {
  local probe_args=$1 v name r code log
  shift
  for v in "$@"; do
    name=${v%%:*}
    [[ "$v" == *:* && "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "hang-check: bad variant '$v' (NAME:ENV)"; return 2; }
  done
  declare -A hung failed ok hashes
  for ((r = 1; r <= RUNS; r++)); do
    for v in "$@"; do
      name=${v%%:*}
      log=$(mktemp)
      # timeout signals the probe's whole process group, so a hung probe and anything it started go together
      # shellcheck disable=SC2086
      env ${v#*:} timeout -s KILL "$LIMIT" $PROBE $probe_args > "$log" 2>&1
      code=$?
      local hash tok
      hash=$(grep -o '"idsHash":"[0-9a-f]*"' "$log" | head -1 | cut -d'"' -f4)
      tok=$(grep -o '"prefillTokS":[0-9]*' "$log" | head -1 | cut -d: -f2)
      if [ "$code" -eq 137 ] || [ "$code" -eq 124 ]; then
        hung[$name]=$((${hung[$name]:-0} + 1))
        echo "$name run $r: HUNG (killed after ${LIMIT} s)"
      elif [ "$code" -ne 0 ]; then
        failed[$name]=$((${failed[$name]:-0} + 1))
        echo "$name run $r: exit $code"
        tail -3 "$log"
      else
        ok[$name]=$((${ok[$name]:-0} + 1))
        echo "$name run $r: ok, prefill ${tok:--} tokens/s, ids hash ${hash:--}"
      fi
      [ -n "$hash" ] && hashes[$name]="${hashes[$name]:-} $hash"
      rm -f "$log"
    done
  done
  local bad=0 distinct
  for v in "$@"; do
    name=${v%%:*}
    distinct=$(echo "${hashes[$name]:-}" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
    echo "== $name (${v#*:}): ${ok[$name]:-0} ok, ${hung[$name]:-0} hung, ${failed[$name]:-0} failed of $RUNS; ids hashes: ${distinct:--}"
    [ "${hung[$name]:-0}" -eq 0 ] && [ "${failed[$name]:-0}" -eq 0 ] || bad=1
  done
  return "$bad"
}

main "$@" 2>&1 | tee "$FINAL_OUT/hang-check.txt"
exit "${PIPESTATUS[0]}"
