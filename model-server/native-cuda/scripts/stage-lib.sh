# Time budget of the staged device scripts (device-check.sh, moe-ab.sh, fused-ab.sh): each stage runs
# only while enough of BUDGET_S seconds is left, so a run cut short still returns what it finished.
# Source it once the work folder $OUT exists and BUDGET_S is set; the clock (START) starts then:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"
#   if stage "tests" 80; then timeout "$(lim 80)" ...; fi
START=$(date +%s)
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
