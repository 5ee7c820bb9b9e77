#!/usr/bin/env bash
# A/B of the L2 weight prefetch (l2_prefetch.cuh: qkv_post -> o + router, route_small -> the
# routed experts, moe_combine_norm -> the next layer's q|k|v) on the GPU machine, same carry as
# device-check.sh. One mode per device call, each about a minute or two:
#
#   bash model-server/native-cuda/scripts/prepare-device.sh   # on the CPU machine: addon + bundles from HEAD
#   run(command="bash model-server/native-cuda/scripts/prefetch-ab.sh logits", timeout_s=150,
#       carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"])
#   run(command="bash model-server/native-cuda/scripts/prefetch-ab.sh probe-a", timeout_s=200, carry=[...])
#   run(command="bash model-server/native-cuda/scripts/prefetch-ab.sh probe-b", timeout_s=200, carry=[...])
#
# logits: a 2-layer Qwen3-30B-A3B-shaped model, batches 1, 2, 4, 16, 64 (prompt 512, 6 decode
#   steps, --sample logits --dump-all: every batch's first decode step, eager, and its last, a
#   graph replay, all rows): prefetch off, off again (the run-to-run floor), on (48 MB), early
#   (issued before pdl_wait); int8 experts off and on. A prefetch is a hint, so every
#   variant must give the same bits as off: ab.txt ends with "PASS: ..." or "FAIL: ...".
# probe-a / probe-b: env-ab.sh's 48-layer decode probe at batches 1, 2, 4, 16, 64 (graph replay,
#   median step): off, on (48 MB), 24 MB / off, 96 MB, early. One line per batch per variant.
set -u
MODE=${1:-logits}
HERE=model-server/native-cuda/scripts
PROBE="--shape qwen3-30b-a3b --batches 1,2,4,16,64 --prompt 512 --steps 24"
case $MODE in
  probe-a) exec bash $HERE/env-ab.sh "$PROBE" off:DISPATCH_CUDA_L2_PREFETCH=0 on: mb24:DISPATCH_CUDA_L2_PREFETCH_MB=24 ;;
  probe-b) exec bash $HERE/env-ab.sh "$PROBE" off:DISPATCH_CUDA_L2_PREFETCH=0 mb96:DISPATCH_CUDA_L2_PREFETCH_MB=96 \
             early:DISPATCH_CUDA_L2_PREFETCH=early ;;
  logits) ;;
  *) echo "prefetch-ab.sh: mode must be logits, probe-a or probe-b" >&2; exit 2 ;;
esac

FINAL_OUT=${OUT:-/tmp/prefetch-ab-out}
OUT=/tmp/prefetch-ab
rm -rf "$OUT"
mkdir -p "$OUT" "$FINAL_OUT"
bash $HERE/unpack-carry.sh > /dev/null || exit 1
START=$(date +%s)
Q2="--shape qwen3-30b-a3b --layers 2 --batches 1,2,4,16,64 --prompt 512 --steps 6 --sample logits --dump-all"
OFF=DISPATCH_CUDA_L2_PREFETCH=0
for v in off:$OFF: off2:$OFF: on:: early:DISPATCH_CUDA_L2_PREFETCH=early: int8-off:$OFF:--int8 int8-on::--int8; do
  IFS=: read -r name e flag <<< "$v"
  # shellcheck disable=SC2086
  env ${e//,/ } timeout 40 /tmp/bun bench/serving/decode-probe.ts $Q2 $flag --dump-logits "$OUT/logits-$name.f32" \
    > "$OUT/ab-$name.jsonl" 2> "$OUT/ab-$name.log"
  echo "== $name (${e:-defaults} $flag) exit $? (t+$(($(date +%s) - START)) s)" | tee -a "$OUT/stages.log"
done
python3 - "$OUT" > "$OUT/ab.txt" 2>&1 <<'PY'
import glob, os, sys
import numpy as np
o = sys.argv[1]
def files(n):  # suffix (.b<B>.s<step>.f32) -> path
    return {p[len(f"{o}/logits-{n}.f32"):]: p for p in glob.glob(f"{o}/logits-{n}.f32.b*.f32")}
bad, floor = [], True
pairs = [("off2", "off"), ("on", "off"), ("early", "off"), ("int8-on", "int8-off")]
for a, b in pairs:
    fa, fb = files(a), files(b)
    if not fb or set(fa) != set(fb):
        print(f"{a} vs {b}: dumps missing ({len(fa)} and {len(fb)} files)")
        bad.append(f"{a} vs {b}: dumps missing")
        continue
    for sfx in sorted(fb, key=lambda s: [int(x[1:]) for x in s.split(".")[1:3]]):
        x, y = np.fromfile(fa[sfx], np.float32), np.fromfile(fb[sfx], np.float32)
        same = open(fa[sfx], "rb").read() == open(fb[sfx], "rb").read()
        d = np.abs(x - y).max() if x.size == y.size and x.size else float("nan")
        print(f"{a} vs {b} {sfx}: n={y.size} {'IDENTICAL' if same else 'DIFFER'} max|diff|={d:.6g}")
        if not same:
            if a == "off2":
                floor = False
            else:
                bad.append(f"{a} vs {b} {sfx}")
if not floor:
    print("note: off vs off2 differ, the step is not bit-reproducible run to run; compare the max|diff| above against it")
print(("PASS: every prefetch variant gave the same bits as off" if not bad else f"FAIL: {len(bad)} differ: " + "; ".join(bad[:8])))
PY
tar -C "$OUT" --exclude='*.f32' -czf "$FINAL_OUT/prefetch-ab.tgz" .
cat "$OUT/ab.txt"
for f in "$OUT"/ab-*.log; do echo "--- $f"; tail -n 2 "$f"; done
