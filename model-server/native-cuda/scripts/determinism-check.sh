#!/usr/bin/env bash
# Run-to-run determinism of the CUDA backend's logits (same carry as device-check.sh): a 2-layer
# Qwen3-30B-A3B-shaped model, the first decode step's logits at batch 1 after a prefill of each
# prompt length, twice per length; prints IDENTICAL or the largest difference per length.
#   run(command="bash model-server/native-cuda/scripts/determinism-check.sh 512,1024",
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
set -u
W=/tmp/determinism
rm -rf "$W"
mkdir -p "$W"
bash model-server/native-cuda/scripts/unpack-carry.sh > /dev/null || exit 1
IFS=, read -ra LENS <<< "${1:-512,1024}"
for p in "${LENS[@]}"; do
  for run in a b; do
    timeout 40 /tmp/bun bench/serving/decode-probe.ts --shape qwen3-30b-a3b --layers 2 --batches 1 --prompt "$p" --steps 5 \
      --sample logits --dump-logits "$W/p$p-$run.f32" > "$W/p$p-$run.jsonl" 2> "$W/p$p-$run.log" || echo "prompt $p run $run failed: $(tail -n 2 "$W/p$p-$run.log")"
  done
done
python3 - "$W" "${LENS[@]}" <<'PY'
import sys, numpy as np
w, lens = sys.argv[1], sys.argv[2:]
for p in lens:
    try:
        a = np.fromfile(f"{w}/p{p}-a.f32", dtype=np.float32); b = np.fromfile(f"{w}/p{p}-b.f32", dtype=np.float32)
    except Exception as e:
        print(f"prompt {p}: {e}"); continue
    same = a.size == b.size and np.array_equal(a.view(np.int32), b.view(np.int32))
    print(f"prompt {p}: " + ("IDENTICAL" if same else f"DIFFER max|diff|={np.abs(a - b).max():.5f} (n={a.size})"))
PY
