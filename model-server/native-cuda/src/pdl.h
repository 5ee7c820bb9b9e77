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

template <typename... KArgs, typename... Args>
void launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl_enabled() && stream != nullptr ? 1 : 0;  // the step's own stream only (tests use stream 0)
  DC_CUDA(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace dcuda
