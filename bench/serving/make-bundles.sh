#!/usr/bin/env bash
# Bundles the model server and the gateway into single files (plus tiktoken's wasm beside them)
# for the GPU machine, which has Bun but no node_modules. The model server's bundle sits three
# levels below model-server/ so its addon paths (import.meta.dir/../../../native-cuda) resolve.
#   bash bench/serving/make-bundles.sh   ->   model-server/native-cuda/build/bundle/
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=model-server/native-cuda/build/bundle
mkdir -p "$OUT"
BUN=${BUN:-node_modules/.bin/bun}
$BUN build model-server/src/main.ts --target bun --outfile "$OUT/model-server.js"
$BUN build gateway/src/main.ts --target bun --outfile "$OUT/gateway.js"
cp node_modules/tiktoken/tiktoken_bg.wasm "$OUT/"
ls -la "$OUT"
