// Programmatic Dependent Launch (sm_90) for the step's small kernels, as kernels/src/common/launch.h
// does for the grouped GEMMs: a kernel launched with launch_k() may start while the previous
// kernel on the stream is still running, once every CTA of that kernel has called pdl_trigger();
// it calls pdl_wait() before it reads or writes anything another kernel produces or consumes
// (weights may be read before: nothing writes them). griddepcontrol.wait returns once the
// previous grid has completed and its writes are visible, so ordering stays transitive. Both
// instructions are no-ops in a kernel launched without the attribute. Launch latency and CTA
// setup (and a GEMV's first weight loads) then overlap the previous kernel's tail.
// Off with DISPATCH_CUDA_PDL=0 or DISPATCH_CUDA_UNFUSED=1.
#pragma once
#include <cuda_runtime.h>
#include <utility>
#include "check.h"

namespace dcuda {

bool pdl_enabled();

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// launch_k with a thread-block cluster of `cluster` CTAs (dim3(1, 1, 1): none), as the split-K
// GEMMs launch: the cluster attribute when it has more than one CTA, PDL as launch_k.
template <typename... KArgs, typename... Args>
void launch_kc(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, dim3 cluster,
               Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  int na = 0;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attrs[na].id = cudaLaunchAttributeClusterDimension;
    attrs[na].val.clusterDim.x = cluster.x;
    attrs[na].val.clusterDim.y = cluster.y;
    attrs[na].val.clusterDim.z = cluster.z;
    ++na;
  }
  if (pdl_enabled() && stream != nullptr) {  // the step's own stream only (tests use stream 0)
    attrs[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = na;
  DC_CUDA(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... KArgs, typename... Args>
void launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_kc(kernel, grid, block, smem, stream, dim3(1, 1, 1), std::forward<Args>(args)...);
}

}  // namespace dcuda
