#!/usr/bin/env bash
# Prefill kernels side by side under environment variants, in one device call: timeline.sh (the decode probe under
# the CUPTI kernel tracer) once per variant, then bench/serving/eager_timeline.py over the eager (prefill) launches of
# all of them, and the probe's prefill tokens/s and ids hash per variant (the same hash = the same sampled ids, so the
# same bits where the arithmetic did not change). From the repository root, with the usual carry (timeline.sh's):
#
#   run(command='OUT=$OUT bash model-server/native-cuda/scripts/prefill-ab.sh "--shape qwen3-30b-a3b --batches 64
#       --prompt 512 --steps 6" "base:" "one-cta:DK_ALIGN_CLUSTER=1"', carry=[...])
#
# A variant is NAME:ENV (ENV: space-separated VAR=value, or empty for the defaults; NAME: letters, digits, - and _).
# Writes $OUT/prefill-ab.txt (what it prints) and $OUT/prefill-ab.tgz (each variant's timeline.tgz): one archive, so
# the call's file count stays small however many variants run. Each probe run is limited to 100 s.
set -u
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
cd "$(dirname "$0")/../../.."
FINAL_OUT=${OUT:-/tmp/prefill-ab-out}
WORK=/tmp/prefill-ab
rm -rf "$WORK"
mkdir -p "$WORK" "$FINAL_OUT"

main() {
  local probe_args=$1 v name env_vars n
  shift
  local names=() args=()
  for v in "$@"; do  # every variant checked before the first run
    name=${v%%:*}
    [[ "$v" == *:* && "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "prefill-ab: bad variant '$v' (NAME:ENV)"; return 2; }
  done
  for v in "$@"; do
    name=${v%%:*}
    env_vars=${v#*:}
    mkdir -p "$WORK/$name"
    TIMELINE_ENV="$env_vars" OUT="$WORK/$name" timeout 100 bash model-server/native-cuda/scripts/timeline.sh \
      "$probe_args" > "$WORK/$name/timeline.log" 2>&1
    echo "== $name (${env_vars:-defaults}): timeline exit $?"
    if tar -C "$WORK/$name" -xzf "$WORK/$name/timeline.tgz" 2>/dev/null && [ -s "$WORK/$name/kernel-trace.csv" ]; then
      names+=("$name")
      grep -ho '"prefillTokS":[0-9]*\|"idsHash":"[0-9a-f]*"' "$WORK/$name/plain.out" "$WORK/$name/probe.out" | tr '\n' ' '
      echo
    else
      tail -3 "$WORK/$name/timeline.log"
    fi
  done
  for n in "${names[@]}"; do args+=("$n=$WORK/$n/kernel-trace.csv"); done
  [ ${#args[@]} -gt 0 ] || { echo "prefill-ab: no variant produced a trace"; return 1; }
  python3 bench/serving/eager_timeline.py "${args[@]}" --top 20
}

main "$@" 2>&1 | tee "$FINAL_OUT/prefill-ab.txt"
status=${PIPESTATUS[0]}
tar -C "$WORK" -czf "$FINAL_OUT/prefill-ab.tgz" --exclude='*/kernel-trace.csv' --exclude='*/plain.*' --exclude='*/probe.*' . 2>/dev/null
exit "$status"
