// A kernel's dynamic shared memory limit raised once per device: cudaFuncSetAttribute's
// MaxDynamicSharedMemorySize holds for the current device only (docs/findings.md), and EP drives several GPUs
// from one process.
#pragma once
#include <cuda_runtime.h>
#include <atomic>
#include <cstdint>
#include "check.h"

namespace dcuda {

// `done`: the caller's set of devices (bit per device id) already raised for this kernel; one static per kernel.
template <class Kernel>
void opt_in_shared_memory(Kernel kernel, size_t bytes, std::atomic<uint64_t>& done) {
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (done.load() & bit)) return;
  DC_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  done.fetch_or(bit);
}

}  // namespace dcuda
