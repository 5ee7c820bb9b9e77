#!/usr/bin/env bash
# One bounded run on nvidia-h200-x2 (2 GPUs; more are used as 2), from the repository root:
#   bash bench/ep/device.sh
# Builds ep_bench and nvlink_ceiling with nvcc on the machine, measures the NVLink ceiling
# (copy engine and SM stores, one direction and both), runs a small correctness smoke test of the
# new code paths (T = 1, 5, 128; and uneven shares with a rank of 0 tokens), then three variants
# side by side, each with its round-trip check (exit 1 on a wrong result):
#   nccl         the old backend as first measured (grouped ncclSend/ncclRecv; low-latency mode
#                sends whole capacity regions)
#   nccl-tokens  the same backend with --ll-wire tokens (low-latency: each token once per peer)
#   p2p          the new backend (NVLink peer writes from kernels)
# for both shapes (DeepSeek-V3: H 7168, 256 experts, top-8; deepseek-moe-16b: H 2048, 64, top-6),
# at 128 and 4096 tokens per rank (nccl-tokens: 128 only; it differs from nccl in low-latency mode
# alone). Every GPU command runs under `timeout`, each capped by what is
# left of a 170 s budget, so the script ends within 3 minutes; expected ~2 minutes. Results
# (8 files) under $OUT (default /tmp/ep-device):
#   ep-device.log                                        everything printed, each step's exit status
#   ep-2gpu-{dsv3,dsmoe16b}-{nccl,nccl-tokens,p2p}.json
#   summary.txt                                          one line per (variant, shape, mode, T), rank 0
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/ep-device}
BUILD=/tmp/ep-device-build
mkdir -p "$OUT"
LOG="$OUT/ep-device.log"
BUDGET_END=$(( $(date +%s) + 170 ))
step() {  # step <seconds> <command...>: under timeout (capped by the budget left), logs its exit status
  local t=$1 left=$(( BUDGET_END - $(date +%s) ))
  shift
  if [ "$left" -lt 5 ]; then
    echo "+ $* skipped (time budget spent)"
    echo "= exit 124"
    return 0
  fi
  [ "$t" -le "$left" ] || t=$left
  echo "+ $* (timeout ${t}s)"
  timeout -k 3 "$t" "$@"
  echo "= exit $?"
  return 0
}
{
  date -u
  git log -1 --format='commit %H' 2>/dev/null || true
  timeout 20 nvidia-smi -L
  timeout 20 nvidia-smi topo -m
  step 120 bench/ep/build.sh "$BUILD"
  if [ -x "$BUILD/ep_bench" ]; then
    step 20 "$BUILD/nvlink_ceiling"
    SMALL=(--gpus 2 --hidden 256 --experts 16 --topk 4 --iters 4)
    for v in "--backend p2p" "--backend nccl --ll-wire tokens"; do  # small shape: fast to fail, edge cases
      step 20 "$BUILD/ep_bench" $v "${SMALL[@]}" --tokens 1,5,128
      step 20 "$BUILD/ep_bench" $v "${SMALL[@]}" --tokens 5,128 --uneven 1
    done
    DSV3=(--gpus 2 --hidden 7168 --experts 256 --topk 8 --tokens 128,4096 --iters 30)
    DSMOE=(--gpus 2 --hidden 2048 --experts 64 --topk 6 --tokens 128,4096 --iters 30)
    for shape in dsv3 dsmoe16b; do
      if [ "$shape" = dsv3 ]; then args=("${DSV3[@]}"); else args=("${DSMOE[@]}"); fi
      step 40 "$BUILD/ep_bench" --backend nccl "${args[@]}" --json "$OUT/ep-2gpu-$shape-nccl.json"
      step 40 "$BUILD/ep_bench" --backend p2p "${args[@]}" --json "$OUT/ep-2gpu-$shape-p2p.json"
      step 40 "$BUILD/ep_bench" --backend nccl --ll-wire tokens "${args[@]}" --tokens 128 --json "$OUT/ep-2gpu-$shape-nccl-tokens.json"
    done
  fi
  date -u
} 2>&1 | tee "$LOG"
python3 - "$OUT" > "$OUT/summary.txt" 2>&1 <<'PY' || true
import json, os, sys
out = sys.argv[1]
print("variant shape mode T dispatch_us combine_us disp_GBps comb_GBps disp_arrive_us comb_arrive_us "
      "disp_arrive_nvl_GBps comb_arrive_nvl_GBps max_rel_err (rank 0)")
for shape in ("dsv3", "dsmoe16b"):
    for b in ("nccl", "nccl-tokens", "p2p"):
        p = os.path.join(out, f"ep-2gpu-{shape}-{b}.json")
        if not os.path.exists(p):
            print(b, shape, "no result"); continue
        j = json.load(open(p))
        for r in j["rows"]:
            if r["rank"] != 0: continue
            print(b, shape, r["mode"], r["tokens"], r["dispatch_us"], r["combine_us"], r["dispatch_GBps"], r["combine_GBps"],
                  r["dispatch_arrive_us"], r["combine_arrive_us"], r["dispatch_arrive_remote_GBps"],
                  r["combine_arrive_remote_GBps"], r["max_rel_err"])
        print(b, shape, "check_ok", j["check_ok"])
PY
cat "$OUT/summary.txt"
if grep -q "= exit [^0]" "$LOG"; then exit 1; fi
exit 0
