#!/usr/bin/env bash
# A shorter GPU run than device-check.sh: the engine over the real CUDA runner
# (engine-cuda.test.ts: GPU-sampled steps against the logits path) and the serving benchmark
# (device-serve.js: random Qwen3-30B-A3B, concurrency 1, 4, 16, 64, 512-token prompts, 256 out,
# EOS ignored, through the gateway and direct, with the weight roofline measured in the same run).
#
#   bash model-server/native-cuda/scripts/prepare-device.sh   # on the CPU machine: addon + bundles from HEAD
#   run(command="bash bench/serving/device-serve-check.sh", timeout_s=280,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#
# Writes $OUT/serve-check.tgz (logs, the model server's log, every JSON line; not the random
# model's files) and $OUT/serve.jsonl, and prints a summary table.
set -u
FINAL_OUT=${OUT:-/tmp/serve-check-out}
W=/tmp/serve-check
rm -rf "$W"
mkdir -p "$W" "$FINAL_OUT"
tar -C model-server/native-cuda/build -xJf .carry/cuda-build.tar.xz 2>/dev/null \
  || python3 -c "import tarfile; tarfile.open('.carry/cuda-build.tar.xz').extractall('model-server/native-cuda/build')"
{ xz -dc .carry/bun.xz > /tmp/bun 2>/dev/null || python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.carry/bun.xz'), open('/tmp/bun', 'wb'))"; } && chmod +x /tmp/bun
BUN=/tmp/bun
BUNDLE=model-server/native-cuda/build/bundle
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$W/nvidia-smi.csv" 2>&1

echo "== engine over the CUDA runner"
timeout 60 $BUN test "./$BUNDLE/engine-cuda.test.js" > "$W/engine-cuda.log" 2>&1
echo "exit $?" >> "$W/engine-cuda.log"
tail -n 8 "$W/engine-cuda.log"

echo "== serving"
timeout 190 $BUN "$BUNDLE/device-serve.js" --shape qwen3-30b-a3b --concurrency 1,4,16,64 --input-len 512 --output-len 256 \
  --budget-s 170 --out "$W/serve" > "$W/serve.jsonl" 2> "$W/serve.log"
echo "exit $?" >> "$W/serve.log"
grep -hE "KV cache|ready|failed|rror" "$W/serve/model-server.log" 2>/dev/null | head -n 5
tail -n 3 "$W/serve.log"
cp "$W/serve.jsonl" "$FINAL_OUT/serve.jsonl"
tar -C "$W" --exclude='qwen3-30b-a3b-random' -czf "$FINAL_OUT/serve-check.tgz" .
python3 - "$W/serve.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
for r in rows:
    if r.get("kind") == "roofline":
        print("roofline:", json.dumps({k: v for k, v in r.items() if k != "perConcurrency"}))
print(f"{'c':>3} {'target':<10} {'ok':>4} {'TTFT p50':>9} {'p99':>8} {'TPOT p50':>9} {'p99':>7} {'ITL p50':>8} {'p99':>7} {'out tok/s':>9} {'decode':>7} {'roof':>6} {'share':>6}")
for r in rows:
    if "target" not in r:
        continue
    f = lambda d, k: f"{r[d][k]:.1f}" if r.get(d) else "-"
    print(f"{r['concurrency']:>3} {r['target']:<10} {r['completed']:>4} {f('ttftMs','p50'):>9} {f('ttftMs','p99'):>8} {f('tpotMs','p50'):>9} {f('tpotMs','p99'):>7} "
          f"{f('itlMs','p50'):>8} {f('itlMs','p99'):>7} {r['outputTokS']:>9.0f} {str(r['decodeTokS']):>7} {str(r['rooflineTokS']):>6} {str(r['ofRoofline']):>6}"
          + (f"  short {r['shortOutputs']} errors {r['errors']}" if r['shortOutputs'] or r['errors'] else ""))
PY
