#!/usr/bin/env bash
# On the GPU machine (no Node, no Bun, no node_modules), from the repository root: unpacks what
# prepare-device.sh put in .carry/ -- the addon and the Bun bundles into
# model-server/native-cuda/build/, Bun itself into /tmp/bun (xz, or Python's lzma where xz is
# missing). Every device script runs this first; exits nonzero when something is missing.
set -u
cd "$(dirname "$0")/../../.."
# The tree, shared/ and both files can pass the call's 64 MiB: then carry bun.xz in one call and cuda-build.tar.xz in
# the next while the machine is warm (it keeps /tmp between calls): a file not carried is fine where what it unpacks
# to is already there.
if [ -f .carry/cuda-build.tar.xz ]; then
  mkdir -p model-server/native-cuda/build
  tar -C model-server/native-cuda/build -xJf .carry/cuda-build.tar.xz 2>/dev/null \
    || python3 -c "import tarfile; tarfile.open('.carry/cuda-build.tar.xz').extractall('model-server/native-cuda/build')" \
    || { echo "unpack-carry: could not unpack .carry/cuda-build.tar.xz" >&2; exit 1; }
elif [ ! -f model-server/native-cuda/build/Release/dispatch_cuda.node ]; then
  echo "unpack-carry: .carry/cuda-build.tar.xz is missing (run prepare-device.sh and carry it)" >&2; exit 1
fi
if [ -f .carry/bun.xz.part-ab ] && [ -f /tmp/bun.xz.part-aa ]; then
  # Bun in two parts, the first carried by an earlier call into /tmp (prepare-device.sh)
  { cat /tmp/bun.xz.part-aa .carry/bun.xz.part-ab | xz -dc > /tmp/bun 2>/dev/null \
    || python3 -c "import lzma, sys; sys.stdout.buffer.write(lzma.decompress(open('/tmp/bun.xz.part-aa','rb').read() + open('.carry/bun.xz.part-ab','rb').read()))" > /tmp/bun; } \
    && chmod +x /tmp/bun || { echo "unpack-carry: could not join and unpack the bun.xz parts" >&2; exit 1; }
elif [ -f .carry/bun.xz ]; then
  { xz -dc .carry/bun.xz > /tmp/bun 2>/dev/null \
    || python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.carry/bun.xz'), open('/tmp/bun', 'wb'))"; } \
    && chmod +x /tmp/bun || { echo "unpack-carry: could not unpack .carry/bun.xz" >&2; exit 1; }
elif [ ! -x /tmp/bun ]; then
  echo "unpack-carry: .carry/bun.xz is missing and no /tmp/bun from an earlier call (run prepare-device.sh and carry it)" >&2
  exit 1
fi
