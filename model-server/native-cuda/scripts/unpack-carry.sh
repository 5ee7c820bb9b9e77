#!/usr/bin/env bash
# On the GPU machine (no Node, no Bun, no node_modules), from the repository root: unpacks what
# prepare-device.sh put in .carry/ -- the addon and the Bun bundles into
# model-server/native-cuda/build/, Bun itself into /tmp/bun (xz, or Python's lzma where xz is
# missing). Every device script runs this first; exits nonzero when something is missing.
set -u
cd "$(dirname "$0")/../../.."
for f in .carry/bun.xz .carry/cuda-build.tar.xz; do
  [ -f "$f" ] || { echo "unpack-carry: $f is missing (run prepare-device.sh and carry it)" >&2; exit 1; }
done
mkdir -p model-server/native-cuda/build
tar -C model-server/native-cuda/build -xJf .carry/cuda-build.tar.xz 2>/dev/null \
  || python3 -c "import tarfile; tarfile.open('.carry/cuda-build.tar.xz').extractall('model-server/native-cuda/build')" \
  || { echo "unpack-carry: could not unpack .carry/cuda-build.tar.xz" >&2; exit 1; }
{ xz -dc .carry/bun.xz > /tmp/bun 2>/dev/null \
  || python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.carry/bun.xz'), open('/tmp/bun', 'wb'))"; } \
  && chmod +x /tmp/bun || { echo "unpack-carry: could not unpack .carry/bun.xz" >&2; exit 1; }
