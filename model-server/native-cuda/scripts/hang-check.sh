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
# limit is first examined (diagnose below: $OUT/hang-NAME-RUN.txt), then killed with its process group (so the next run
# starts on an idle GPU) and counted as a hang; HANG_STOP=1 ends the check at the first hang. Prints one line per run
# (exit, prefill tokens/s, ids hash) and a summary line per variant; writes $OUT/hang-check.txt. Exit status: 0 when no
# run hung or failed, 1 otherwise, 2 on bad arguments. PROBE_CMD replaces the probe (tests).
set -u
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
cd "$(dirname "$0")/../../.."
FINAL_OUT=${OUT:-/tmp/hang-check-out}
mkdir -p "$FINAL_OUT"
RUNS=${HANG_RUNS:-4}
LIMIT=${HANG_LIMIT_S:-60}
STOP=${HANG_STOP:-0}
PROBE=${PROBE_CMD:-/tmp/bun bench/serving/decode-probe.ts}
[[ "$RUNS" =~ ^[1-9][0-9]*$ && "$LIMIT" =~ ^[1-9][0-9]*$ ]] || { echo "hang-check: HANG_RUNS and HANG_LIMIT_S must be positive integers" >&2; exit 2; }

# Where a hung probe is: GPU utilization (a spinning kernel keeps it at 100%), the kernels and warps resident on the
# GPU, the focused warp's registers and the first 128 bytes of its CTA's shared memory (static mbarriers sit there),
# and the host threads' stacks (cuda-gdb attached in batch mode, where the machine has it). HANG_DIAG_CMD
# replaces this (tests); it gets the probe's pid.
diagnose() {
  if [ -n "${HANG_DIAG_CMD:-}" ]; then $HANG_DIAG_CMD "$1"; return; fi
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw --format=csv
  local gdb
  gdb=$(command -v cuda-gdb || ls /usr/local/cuda/bin/cuda-gdb 2> /dev/null | head -1)
  if [ -n "$gdb" ]; then
    timeout -s KILL 120 "$gdb" -p "$1" -batch -ex "info cuda kernels" -ex "info cuda blocks" -ex "info cuda warps" \
      -ex "info cuda lanes" -ex "bt" -ex "x/8i \$pc" -ex "info registers" -ex "x/16gx (@shared unsigned long *) 0" \
      -ex "thread apply all bt 12" < /dev/null
  else
    echo "no cuda-gdb on this machine"
  fi
}

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
      # the probe leads a process group of its own (setsid), so a hung probe and anything it started go together
      # shellcheck disable=SC2086
      env ${v#*:} setsid $PROBE $probe_args > "$log" 2>&1 &
      local pid=$! deadline=$((SECONDS + LIMIT))
      while kill -0 "$pid" 2> /dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
      if kill -0 "$pid" 2> /dev/null; then
        # still running at its limit: say where it is (stopped in the debugger, so the kernels stay as they hung),
        # then kill the group
        { diagnose "$pid"; echo "== probe output"; cat "$log"; } > "$FINAL_OUT/hang-$name-$r.txt" 2>&1
        kill -KILL -- "-$pid" 2> /dev/null
        wait "$pid" 2> /dev/null
        code=137
      else
        wait "$pid"
        code=$?
      fi
      local hash tok
      hash=$(grep -o '"idsHash":"[0-9a-f]*"' "$log" | head -1 | cut -d'"' -f4)
      tok=$(grep -o '"prefillTokS":[0-9]*' "$log" | head -1 | cut -d: -f2)
      if [ "$code" -eq 137 ] || [ "$code" -eq 124 ]; then
        hung[$name]=$((${hung[$name]:-0} + 1))
        echo "$name run $r: HUNG (killed after ${LIMIT} s; where: $FINAL_OUT/hang-$name-$r.txt)"
        [ "$STOP" = 1 ] && break 2
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
    echo "== $name (${v#*:}): ${ok[$name]:-0} ok, ${hung[$name]:-0} hung, ${failed[$name]:-0} failed of" \
      "$((${ok[$name]:-0} + ${hung[$name]:-0} + ${failed[$name]:-0})); ids hashes: ${distinct:--}"
    [ "${hung[$name]:-0}" -eq 0 ] && [ "${failed[$name]:-0}" -eq 0 ] || bad=1
  done
  return "$bad"
}

main "$@" 2>&1 | tee "$FINAL_OUT/hang-check.txt"
exit "${PIPESTATUS[0]}"
