#!/usr/bin/env bash
# GPU run of expert parallelism's serving path (nvidia-h200-x2): the data-parallel EP runner
# (parallel/cuda-ep-runner.ts) against EP=1 on the golden fixtures and the full deepseek-moe-16b
# shape (native-cuda/scripts/ep-dp-greedy.ts: greedy tokens, decode tok/s at batch 1 and 64), then,
# if that passed, the serving benchmark on the deepseek-moe-16b shape at EP=1 and at EP=2, one
# after the other in this run (device-serve.js: gateway + model server, 512 in / 256 out).
#
#   bash model-server/native-cuda/scripts/prepare-device.sh      # CPU machine: addon + bundles from HEAD
#   run(kind="nvidia-h200-x2", timeout_s=600, command="bash bench/ep/ep-dp-serve-check.sh",
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#
# EP_SERVE=0 skips the serving runs; EP_SERVE_CONC (default 1,4,16,64) and EP_SERVE_BUDGET_S
# (default 130, per run) bound them; EP_AB_ENV (default DISPATCH_CUDA_EP_GRAPHS=0; empty: skip)
# runs the deepseek check again with that environment; EP_BENCH=0 skips ep_bench (p2p smoke, latency
# at 1-128 tokens, DeepSeek-V3 at 128; built on the CPUs meanwhile), run as is and again with
# EP_BENCH_AB_ENV (default DISPATCH_EP_P2P_FUSED_WAIT=0).
# Files under $OUT: ep-dp-greedy.jsonl, ep-dp-greedy-ab.jsonl, ep-dp-greedy.log,
# serve.jsonl, serve.tgz (logs of both runs), exit.txt. Every GPU command runs under `timeout`.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# a lazily loaded kernel can wait for its device to go idle while a p2p wait kernel spins there
export CUDA_MODULE_LOADING=EAGER
OUT=${OUT:-/tmp/ep-dp-serve-check}
W=/tmp/ep-dp-serve
rm -rf "$W"
mkdir -p "$OUT" "$W"
START=$(date +%s)
bash model-server/native-cuda/scripts/unpack-carry.sh || exit 1
BUN=/tmp/bun
BUNDLE=model-server/native-cuda/build/bundle
timeout 20 nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv > "$W/nvidia-smi.csv" 2>&1
# the exchange microbenchmark builds on the CPUs while the GPUs run the checks (EP_BENCH=0: skip)
if [ "${EP_BENCH:-1}" = 1 ]; then
  (timeout 240 bash bench/ep/build.sh /tmp/ep-dp-bench > "$W/ep-bench-build.log" 2>&1; echo "build exit $?" >> "$W/ep-bench-build.log") &
  BUILD_PID=$!
fi

echo "== EP=2 data-parallel runner vs EP=1 (greedy, decode tok/s)"
timeout 220 $BUN model-server/native-cuda/scripts/ep-dp-greedy.ts --ranks 2 --tokens 32 > "$OUT/ep-dp-greedy.jsonl" 2> "$OUT/ep-dp-greedy.log"
RC=$?
cat "$OUT/ep-dp-greedy.jsonl" | cut -c1-1500; tail -n 5 "$OUT/ep-dp-greedy.log"
echo "ep-dp-greedy exit $RC after $(($(date +%s) - START)) s" | tee "$OUT/exit.txt"
if [ "$RC" = 0 ] && [ -n "${EP_AB_ENV-DISPATCH_CUDA_EP_GRAPHS=0}" ]; then
  # the same deepseek-moe-16b check again with EP_AB_ENV set (default: EP decode eager), side by side
  AB=${EP_AB_ENV-DISPATCH_CUDA_EP_GRAPHS=0}
  echo "== the deepseek-moe-16b check again with $AB"
  env $AB timeout 120 $BUN model-server/native-cuda/scripts/ep-dp-greedy.ts --ranks 2 --tokens 32 --archs "" \
    > "$OUT/ep-dp-greedy-ab.jsonl" 2>> "$OUT/ep-dp-greedy.log"
  echo "ep-dp-greedy ($AB) exit $?" | tee -a "$OUT/exit.txt"
  grep -o '"decodeTokensPerS":{[^}]*}[^}]*}' "$OUT/ep-dp-greedy-ab.jsonl"
fi
if [ "$RC" = 0 ] && [ "${EP_SERVE:-1}" = 1 ]; then
  BUDGET=${EP_SERVE_BUDGET_S:-130}
  : > "$W/serve.jsonl"
  for ep in 1 2; do
    LEFT=$((570 - ($(date +%s) - START)))
    [ "$LEFT" -gt 60 ] || { echo "serving at EP=$ep skipped: ${LEFT} s left" | tee -a "$OUT/exit.txt"; break; }
    B=$(( BUDGET < LEFT - 45 ? BUDGET : LEFT - 45 ))
    echo "== serving deepseek-moe-16b at EP=$ep (budget $B s)"
    timeout $((B + 40)) $BUN "$BUNDLE/device-serve.js" --shape deepseek-moe-16b --targets gateway --ep "$ep" \
      --concurrency "${EP_SERVE_CONC:-1,4,16,64}" --input-len 512 --output-len 256 --budget-s "$B" --out "$W/serve-ep$ep" \
      > "$W/serve-ep$ep.jsonl" 2> "$W/serve-ep$ep.log"
    echo "serve EP=$ep exit $?" | tee -a "$OUT/exit.txt"
    grep -hE "KV cache|ready|failed|rror" "$W/serve-ep$ep/model-server.log" 2>/dev/null | head -n 5
    { echo "{\"kind\":\"serve-run\",\"ep\":$ep}"; grep '^{' "$W/serve-ep$ep.jsonl"; } >> "$W/serve.jsonl"
    grep -v '^{' "$W/serve-ep$ep.jsonl"
  done
  cp "$W/serve.jsonl" "$OUT/serve.jsonl"
fi
if [ "${EP_BENCH:-1}" = 1 ]; then
  # p2p low-latency exchange latency at decode sizes (deepseek-moe-16b shape), rank 0 and 1
  wait "$BUILD_PID"
  LEFT=$((585 - ($(date +%s) - START)))
  if [ -x /tmp/ep-dp-bench/ep_bench ] && [ "$LEFT" -gt 20 ]; then
    B=/tmp/ep-dp-bench/ep_bench
    SMALL=(--backend p2p --gpus 2 --hidden 256 --experts 16 --topk 4 --iters 4)
    DS=(--backend p2p --gpus 2 --hidden 2048 --experts 64 --topk 6 --tokens 1,8,64,128 --iters 30)
    V3=(--backend p2p --gpus 2 --hidden 7168 --experts 256 --topk 8 --tokens 128 --iters 30)
    for ab in "" "${EP_BENCH_AB_ENV-DISPATCH_EP_P2P_FUSED_WAIT=0}"; do
      tag=${ab:-default}
      echo "== p2p exchange ($tag): smoke, deepseek-moe-16b at 1-128 tokens, DeepSeek-V3 at 128"
      { env $ab timeout 20 $B "${SMALL[@]}" --tokens 1,5,128 && env $ab timeout 20 $B "${SMALL[@]}" --tokens 5,128 --uneven 1; } > "$W/ep-bench-smoke-$tag.log" 2>&1
      echo "ep_bench smoke ($tag) exit $?" | tee -a "$OUT/exit.txt"
      env $ab timeout 40 $B "${DS[@]}" --json "$W/ep-bench-p2p-small-$tag.json" > "$W/ep-bench-$tag.log" 2>&1
      echo "ep_bench deepseek-moe-16b ($tag) exit $?" | tee -a "$OUT/exit.txt"
      grep -E "^low-latency +[0-9]+ +0 " "$W/ep-bench-$tag.log"
      env $ab timeout 40 $B "${V3[@]}" --json "$W/ep-bench-p2p-v3-$tag.json" > "$W/ep-bench-v3-$tag.log" 2>&1
      echo "ep_bench DeepSeek-V3 ($tag) exit $?" | tee -a "$OUT/exit.txt"
      grep -E "^low-latency +[0-9]+ +0 " "$W/ep-bench-v3-$tag.log"
    done
  else
    echo "ep_bench not run (built: $([ -x /tmp/ep-dp-bench/ep_bench ] && echo yes || echo no), ${LEFT} s left)" | tee -a "$OUT/exit.txt"
    tail -n 3 "$W/ep-bench-build.log"
  fi
fi
tar -C "$W" --exclude='*-random' -czf "$OUT/serve.tgz" . 2>/dev/null
echo "total $(($(date +%s) - START)) s" | tee -a "$OUT/exit.txt"
exit $RC
