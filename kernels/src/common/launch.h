// Kernel launch with Programmatic Dependent Launch (PDL, sm_90): the kernel may be launched while
// the previous kernel on the stream is still running; it calls pdl_wait() before touching that
// kernel's outputs and pdl_trigger() to let the next kernel launch early. Launch latency and
// CTA setup then overlap the previous kernel's tail. Where the previous kernel never triggers,
// the launch simply waits for it to finish, as an ordinary launch does.
#pragma once
#include <cuda_runtime.h>
#include <atomic>
#include <cstdint>
#include "check.h"

namespace dispatch {

extern bool g_use_pdl;  // true by default; benchmarks switch it off to measure its effect

// Multiprocessors of the current device (the persistent kernels' grid bound).
inline int current_device_sms() {
  int dev = 0, n = 0;
  DK_CUDA(cudaGetDevice(&dev));
  DK_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

// Kernel's dynamic shared-memory opt-in (bytes) on the current device, once per device: the attribute holds
// for one device only, and one process may drive several GPUs (native-cuda's expert parallelism).
template <auto Kernel>
void opt_in_smem_once(int bytes) {
  static std::atomic<uint64_t> opted{0};
  int dev = 0;
  DK_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (opted.load() & bit)) return;
  DK_CUDA(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  opted.fetch_or(bit);
}

template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = g_use_pdl ? 1 : 0;
  DK_CUDA(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace dispatch
