# Time budget of the staged device scripts (device-check.sh, moe-ab.sh, fused-ab.sh): each stage runs
# only while enough of BUDGET_S seconds is left, so a run cut short still returns what it finished.
# Stages write under a work folder; the end packs it into one .tgz in the results folder (the device
# returns at most 8 files).
#
#   source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"
#   stage_begin moe-ab 470            # OUT=/tmp/moe-ab (emptied); FINAL_OUT = the caller's $OUT
#   if stage "tests" 80; then timeout "$(lim 80)" ...; fi
#   stage_pack moe-ab.tgz             # $FINAL_OUT/moe-ab.tgz, logit dumps (*.f32) left out

# stage_begin NAME BUDGET_S: results to $OUT (default /tmp/NAME-out) as FINAL_OUT, work folder
# OUT=/tmp/NAME emptied, BUDGET_S unless already set; the clock (START) starts now
stage_begin() {
  FINAL_OUT=${OUT:-/tmp/$1-out}
  OUT=/tmp/$1
  rm -rf "$OUT"
  mkdir -p "$OUT"
  BUDGET_S=${BUDGET_S:-$2}
  START=$(date +%s)
}
# seconds of BUDGET_S left (negative once spent)
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
# stage NAME LIMIT_S: logs the stage; returns 1 (skip) when less than LIMIT_S/2 is left
stage() {
  local l; l=$(left)
  if [ "$l" -lt $(($2 / 2)) ]; then echo "== skipped: $1 ($l s left)" | tee -a "$OUT/stages.log"; return 1; fi
  echo "== $1 (t+$(($(date +%s) - START)) s)" | tee -a "$OUT/stages.log"
}
# lim LIMIT_S: LIMIT_S, or the seconds left when fewer (at least 1), for `timeout`
lim() { local l; l=$(left); [ "$l" -lt 1 ] && l=1; [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
# stage_pack TGZ: logs the end, packs the work folder into $FINAL_OUT/TGZ without the *.f32 dumps
stage_pack() {
  echo "== done (t+$(($(date +%s) - START)) s)" >> "$OUT/stages.log"
  mkdir -p "$FINAL_OUT"
  tar -C "$OUT" --exclude='*.f32' -czf "$FINAL_OUT/$1" .
}
