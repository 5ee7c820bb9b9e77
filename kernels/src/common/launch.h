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

// Launch attribute: thread-block clusters of cluster_x CTAs along x.
inline cudaLaunchAttribute cluster_attr(int cluster_x) {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = unsigned(cluster_x);
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  return a;
}

// cluster_x > 1: thread-block clusters of cluster_x CTAs along x (grid.x a multiple of it).
template <typename... KArgs, typename... Args>
void launch_pdl_cluster(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, int cluster_x,
                        cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  int n = 0;
  if (cluster_x > 1) attrs[n++] = cluster_attr(cluster_x);
  if (g_use_pdl) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  DK_CUDA(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_pdl_cluster(kernel, grid, block, smem, 1, stream, std::forward<Args>(args)...);
}

// How many clusters of cluster_x CTAs (block threads, smem bytes each) can run at once on the current device, once
// per device (the persistent split-K launches size their grid by it). Call after opt_in_smem_once.
template <auto Kernel>
int max_active_clusters_once(int cluster_x, int threads, int smem) {
  static std::atomic<int> cached[64] = {};
  int dev = 0;
  DK_CUDA(cudaGetDevice(&dev));
  if (dev < 64 && cached[dev].load() > 0) return cached[dev].load();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(cluster_x));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = size_t(smem);
  cudaLaunchAttribute attr = cluster_attr(cluster_x);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int n = 0;
  DK_CUDA(cudaOccupancyMaxActiveClusters(&n, Kernel, &cfg));
  DK_CHECK(n > 0, "no cluster of this size fits on the device");
  if (dev < 64) cached[dev].store(n);
  return n;
}

}  // namespace dispatch
