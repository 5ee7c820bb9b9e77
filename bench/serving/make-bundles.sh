#!/usr/bin/env bash
# Bundles the model server, the gateway and the serving run (bench/serving/device-serve.ts) into single files (plus tiktoken's wasm beside them)
# for the GPU machine, which has Bun but no node_modules. Built from the committed tree (git
# archive HEAD), not the working tree, so nobody's half-finished edit ends up in the bundle.
# The model server's bundle sits three levels below model-server/ so its addon paths
# (import.meta.dir/../../../native-cuda/...) resolve.
#   bash bench/serving/make-bundles.sh   ->   model-server/native-cuda/build/bundle/
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=$ROOT/model-server/native-cuda/build/bundle
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
git archive HEAD | tar -x -C "$SRC"
ln -s "$ROOT/node_modules" "$SRC/node_modules"
mkdir -p "$OUT"
BUN=${BUN:-$ROOT/node_modules/.bin/bun}
(cd "$SRC" && $BUN build model-server/src/main.ts --target bun --outfile "$OUT/model-server.js" \
  && $BUN build gateway/src/main.ts --target bun --outfile "$OUT/gateway.js" \
  && $BUN build bench/serving/device-serve.ts --target bun --outfile "$OUT/device-serve.js")
cp node_modules/tiktoken/tiktoken_bg.wasm "$OUT/"
echo "bundled $(git rev-parse --short HEAD) into $OUT"
ls -la "$OUT"
