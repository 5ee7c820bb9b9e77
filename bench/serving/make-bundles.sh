#!/usr/bin/env bash
# Bundles the model server (and its CPU runner thread), the gateway, the serving run (bench/serving/device-serve.ts), the soak (device-soak.ts)
# and the engine's GPU tests (engine-cuda.test.ts, cuda-sampling-extras.test.ts: the engine imports @dispatch/common) into single files (plus tiktoken's wasm beside them)
# for the GPU machine, which has Bun but no node_modules. Built from the committed tree (git
# archive HEAD), not the working tree, so nobody's half-finished edit ends up in the bundle.
# The model server's bundle sits three levels below model-server/ so its addon paths
# (import.meta.dir/../../../native-cuda/...) resolve.
#   bash bench/serving/make-bundles.sh   ->   model-server/native-cuda/build/bundle/ (or $BUNDLE_OUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=${BUNDLE_OUT:-$ROOT/model-server/native-cuda/build/bundle}
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
git archive HEAD | tar -x -C "$SRC"
ln -s "$ROOT/node_modules" "$SRC/node_modules"
mkdir -p "$OUT"
BUN=${BUN:-$ROOT/node_modules/.bin/bun}
(cd "$SRC" && $BUN build model-server/src/main.ts --target bun --outfile "$OUT/model-server.js" \
  && $BUN build gateway/src/main.ts --target bun --outfile "$OUT/gateway.js" \
  && $BUN build bench/serving/device-serve.ts --target bun --outfile "$OUT/device-serve.js" \
  && $BUN build bench/serving/device-soak.ts --target bun --outfile "$OUT/device-soak.js" \
  && $BUN build model-server/src/model/runner-worker.ts --target bun --outfile "$OUT/runner-worker.js" \
  && $BUN build model-server/src/engine/engine-cuda.test.ts --target bun --outfile "$OUT/engine-cuda.test.js" \
  && $BUN build model-server/src/model/cuda-sampling-extras.test.ts --target bun --outfile "$OUT/cuda-sampling-extras.test.js")
# The CPU backend's runner thread: worker-runner.ts starts new URL("./runner-worker.ts", import.meta.url),
# which from the bundle is this folder; Bun runs the bundled JavaScript under that name.
mv "$OUT/runner-worker.js" "$OUT/runner-worker.ts"
cp node_modules/tiktoken/tiktoken_bg.wasm "$OUT/"
# tiktoken finds its wasm from its __dirname, which Bun bundles as this machine's absolute path
# (/work/main/node_modules/tiktoken): the GPU machine has no such folder, and the loader dies with
# "Missing tiktoken_bg.wasm". Point that __dirname at the bundle's own folder, where the wasm is
# copied; a bundle that loads tiktoken but lost the pattern (a Bun or tiktoken change) fails here.
for f in model-server.js gateway.js; do
  perl -0pi -e 's/var (__dirname\w*) = "[^"\n]*node_modules\/tiktoken";/var $1 = import.meta.dir;/g' "$OUT/$f"
  if grep -q 'Missing tiktoken_bg.wasm' "$OUT/$f" && ! grep -qE 'var __dirname[0-9A-Za-z_]* = import.meta.dir;' "$OUT/$f"; then
    echo "make-bundles: $f loads tiktoken but its __dirname was not rewritten" >&2
    exit 1
  fi
  if grep -q 'node_modules/tiktoken";' "$OUT/$f"; then echo "make-bundles: $f still names tiktoken's folder on this machine" >&2; exit 1; fi
done
echo "bundled $(git rev-parse --short HEAD) into $OUT"
ls -la "$OUT"
