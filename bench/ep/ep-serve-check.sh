#!/usr/bin/env bash
# GPU check of expert parallelism in the CUDA backend (nvidia-h200-x2): EP=2 vs EP=1 greedy
# tokens on the golden fixtures and the deepseek-moe-16b shape (random weights, 4 layers), and
# decode tokens/s at batch 1 and 64 (native-cuda/scripts/ep-greedy.ts). The addon is built on
# the CPU machine from the committed tree and carried, with Bun, as in device-check.sh:
#
#   bash model-server/native-cuda/scripts/prepare-device.sh      # CPU machine: addon (+ bundles) from HEAD
#   run(kind="nvidia-h200-x2", timeout_s=300, command="bash bench/ep/ep-serve-check.sh",
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#
# At most 4 files under $OUT: ep-greedy.jsonl (one JSON line per model + summary), ep-greedy.log
# (stderr), env.txt (GPUs, topology, NCCL), exit.txt. Every GPU command runs under `timeout`;
# the whole run stays under 4 minutes. Exits with ep-greedy's status (1: tokens differ beyond a
# near tie, or the ranks disagree; 124: timed out).
set -u
# NVLink multicast stays off (the device notes: it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Modules load eagerly: a lazily loaded kernel can wait for its device to go idle while a p2p wait
# kernel spins there for a peer (a stall at best).
export CUDA_MODULE_LOADING=EAGER
OUT=${OUT:-/tmp/ep-serve-check}
mkdir -p "$OUT"
START=$(date +%s)
bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
{
  echo "bun $(/tmp/bun --version)"
  timeout 20 nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv
  timeout 20 nvidia-smi topo -m
  ls /usr/lib/x86_64-linux-gnu/libnccl* /usr/local/lib/libnccl* 2>/dev/null
} > "$OUT/env.txt" 2>&1
LEFT=$((220 - ($(date +%s) - START)))
timeout "$LEFT" /tmp/bun model-server/native-cuda/scripts/ep-greedy.ts --ranks 2 --tokens 32 --ds-layers 4 --bench-steps 16 --bench-batches 1,64 \
  > "$OUT/ep-greedy.jsonl" 2> "$OUT/ep-greedy.log"
RC=$?
echo "exit $RC after $(($(date +%s) - START)) s" > "$OUT/exit.txt"
cat "$OUT/ep-greedy.jsonl"; tail -n 20 "$OUT/ep-greedy.log"; cat "$OUT/exit.txt"
exit $RC
