#!/usr/bin/env bash
# Everything the GPU machine needs that it cannot build itself, from the committed tree (git
# archive HEAD), so nobody's half-finished edit (kernels/ included) goes along:
#   - the addon, built with nvcc for sm_90a -> model-server/native-cuda/build/Release/dispatch_cuda.node
#   - the model server and gateway as Bun bundles -> model-server/native-cuda/build/bundle/
#   - both packed into .carry/cuda-build.tar.xz (the device call carries at most 64 MiB)
#   - Bun itself as .carry/bun.xz, and that file in two parts (.carry/bun.xz.part-aa, -ab)
# Then, while the tree and bun.xz fit in the call's 64 MiB: run(command="bash model-server/native-cuda/scripts/device-check.sh",
#   timeout_s=330, carry=[".carry/bun.xz", ".carry/cuda-build.tar.xz"]). Past it (the tree is ~29 MB since session
#   27), two calls while the machine is warm (it keeps /tmp between calls for ~30 s):
#   run(command="cp .carry/bun.xz.part-aa /tmp/", carry=[".carry/bun.xz.part-aa"])
#   run(command="bash model-server/native-cuda/scripts/device-check.sh", carry=[".carry/bun.xz.part-ab", ".carry/cuda-build.tar.xz"])
#   (unpack-carry.sh joins /tmp/bun.xz.part-aa and .carry/bun.xz.part-ab).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$(pwd)
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
git archive HEAD | tar -x -C "$SRC"
ln -s "$ROOT/node_modules" "$SRC/node_modules"
(cd "$SRC" && node node_modules/cmake-js/bin/cmake-js compile --directory model-server/native-cuda --out model-server/native-cuda/build > "$SRC/build.log" 2>&1) || { tail -30 "$SRC/build.log"; exit 1; }
mkdir -p model-server/native-cuda/build/Release
cp "$SRC/model-server/native-cuda/build/Release/dispatch_cuda.node" model-server/native-cuda/build/Release/dispatch_cuda.node
bash bench/serving/make-bundles.sh
# Bun for the GPU machine (it has no Node or Bun): xz with the x86 branch filter and a 128 MiB window (36.8 MB
# against 38.0 with -9e alone), since the call carries at most 64 MiB in all (the tracked tree ~25 MB + this + the
# build below ~4 MB); ~1.6 min on one core, once.
if [ ! -f .carry/bun.xz ]; then
  mkdir -p .carry
  xz -c --x86 --lzma2=preset=9e,dict=128MiB node_modules/bun/bin/bun.exe > .carry/bun.xz.tmp && mv .carry/bun.xz.tmp .carry/bun.xz
fi
rm -f .carry/bun.xz.part-*
split -b 19M .carry/bun.xz .carry/bun.xz.part-
# One compressed file: the device call carries at most 64 MiB, and the bundles shrink ~5x.
tar -C model-server/native-cuda/build -cf - bundle Release/dispatch_cuda.node | xz -T2 -9 > .carry/cuda-build.tar.xz
echo "prepared from $(git rev-parse --short HEAD)"
