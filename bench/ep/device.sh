#!/usr/bin/env bash
# One bounded run on nvidia-h200-x2 (2 GPUs; more are used as 2), from the repository root:
#   bash bench/ep/device.sh
# Builds ep_bench and nvlink_ceiling with nvcc on the machine, measures the NVLink ceiling
# (copy engine and SM stores, one direction and both), then runs the old backend (nccl: grouped
# ncclSend/ncclRecv) and the new one (p2p: NVLink peer writes from kernels) side by side, both
# shapes (DeepSeek-V3: H 7168, 256 experts, top-8; deepseek-moe-16b: H 2048, 64, top-6), at 128
# and 4096 tokens per rank, each with its round-trip check (exit 1 on a wrong result).
# Every GPU command runs under `timeout`; expected ~1 minute, at most ~4.5 minutes if every step
# hits its timeout. Results (6 files) under $OUT (default /tmp/ep-device):
#   ep-device.log                        everything printed, with each step's exit status
#   ep-2gpu-{dsv3,dsmoe16b}-{nccl,p2p}.json
#   summary.txt                          one line per (backend, shape, mode, T), rank 0
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/ep-device}
BUILD=/tmp/ep-device-build
mkdir -p "$OUT"
LOG="$OUT/ep-device.log"
status=0
step() {  # step <seconds> <command...>: runs it under timeout, logs its exit status
  local t=$1
  shift
  echo "+ $* (timeout ${t}s)"
  timeout -k 5 "$t" "$@"
  local rc=$?
  echo "= exit $rc"
  [ "$rc" -eq 0 ] || status=1
  return 0
}
{
  date -u
  git log -1 --format='commit %H' 2>/dev/null || true
  timeout 20 nvidia-smi -L
  timeout 20 nvidia-smi topo -m
  step 150 bench/ep/build.sh "$BUILD"
  if [ -x "$BUILD/ep_bench" ]; then
    step 30 "$BUILD/nvlink_ceiling"
    for b in nccl p2p; do
      step 45 "$BUILD/ep_bench" --backend "$b" --gpus 2 --hidden 7168 --experts 256 --topk 8 --tokens 128,4096 --iters 30 \
        --json "$OUT/ep-2gpu-dsv3-$b.json"
      step 45 "$BUILD/ep_bench" --backend "$b" --gpus 2 --hidden 2048 --experts 64 --topk 6 --tokens 128,4096 --iters 30 \
        --json "$OUT/ep-2gpu-dsmoe16b-$b.json"
    done
  fi
  date -u
} 2>&1 | tee "$LOG"
python3 - "$OUT" > "$OUT/summary.txt" 2>&1 <<'PY' || true
import json, os, sys
out = sys.argv[1]
print("backend shape mode T dispatch_us combine_us disp_GBps comb_GBps disp_arrive_us comb_arrive_us "
      "disp_arrive_nvl_GBps comb_arrive_nvl_GBps max_rel_err (rank 0)")
for shape in ("dsv3", "dsmoe16b"):
    for b in ("nccl", "p2p"):
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
grep -q "= exit [^0]" "$LOG" && status=1
exit $status
