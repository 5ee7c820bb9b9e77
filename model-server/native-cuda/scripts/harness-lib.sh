# Shared by the GPU harness scripts in this folder (attention-check.sh, prefill-check.sh,
# gemv-check.sh, gemm-bench.sh); each sources it from model-server/native-cuda after cd-ing there:
#
#   source scripts/harness-lib.sh
#   harness_init NAME          # stdout+stderr also to $OUT/NAME.txt; BIN, NVCC; prints the build line
#   timeout 300 "$NVCC" "${HARNESS_NVCC_FLAGS[@]}" ... -o "$BIN" || harness_build_failed
#     (or: harness_build_objects SRC... to compile several sources in parallel and link them)
#   harness_gpu_info           # (HARNESS_BUILD_ONLY=1: stops here, status 0)
#   harness_parts P1 P2 ...    # "$BIN" --part P under timeout 60, one at a time
#   exit $status
#
# status: 0 when every run exited 0, 1 when one exited 1 (a mismatch) and none worse, 2 when one
# failed otherwise (CUDA error, crash, timeout).

HARNESS_NVCC_FLAGS=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Isrc -I../../kernels/src)
status=0

# NAME: the binary's basename under $TMPDIR and the log's under $OUT. Sets HARNESS_OUT_LOGGING=1
# when $OUT takes a copy of the output.
harness_init() {
  HARNESS_OUT_LOGGING=0
  exec 2>&1
  if [ -n "${OUT:-}" ] && mkdir -p "$OUT"; then
    exec > >(tee "$OUT/$1.txt") 2>&1
    HARNESS_OUT_LOGGING=1
  fi
  BIN=${TMPDIR:-/tmp}/${1//-/_}
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  echo "== build ($("$NVCC" --version | tail -1))"
}

harness_build_failed() {
  echo "== build failed"
  exit 2
}

# harness_build_objects SRC...: each source to "$BIN.<basename>.o" in parallel (gemm.cu's
# templates take the longest), then linked into "$BIN"; any failure stops the script (status 2).
harness_build_objects() {
  local src job ok=1
  for src in "$@"; do
    timeout 300 "$NVCC" "${HARNESS_NVCC_FLAGS[@]}" -Xptxas -warn-spills -c "$src" -o "$BIN.$(basename "$src").o" &
  done
  for job in $(jobs -p); do wait "$job" || ok=0; done
  [ "$ok" -eq 1 ] && timeout 120 "$NVCC" -gencode=arch=compute_90a,code=sm_90a "$BIN".*.cu.o -o "$BIN" ||
    harness_build_failed
}

# Called right after the build; with HARNESS_BUILD_ONLY=1 (CI: no GPU there) the script stops
# here with status 0, so a build break is caught where the harness cannot run.
harness_gpu_info() {
  if [ "${HARNESS_BUILD_ONLY:-0}" = 1 ]; then
    echo "== built (HARNESS_BUILD_ONLY=1)"
    exit 0
  fi
  timeout 60 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
}

# Folds one run's exit code into status (see the top).
harness_fold() {
  if [ "$1" -eq 1 ] && [ "$status" -eq 0 ]; then status=1; fi
  if [ "$1" -ne 0 ] && [ "$1" -ne 1 ]; then status=2; fi
}

# harness_run HEAD TAIL ARGS...: prints "== HEAD", runs "$BIN" ARGS under timeout 60, prints
# "== TAIL <exit code>" and folds the code into status.
harness_run() {
  local head=$1 tail=$2
  shift 2
  echo "== $head"
  timeout 60 "$BIN" "$@"
  local rc=$?
  echo "== $tail $rc"
  harness_fold "$rc"
}

harness_parts() {
  local part
  for part in "$@"; do harness_run "part $part" "part $part exit" --part "$part"; done
}
