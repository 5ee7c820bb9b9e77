// See pdl_producer.h.
#include <cstdint>
#include "pdl_producer.h"
#include "../common/check.h"
#include "../common/sm90.cuh"

namespace dispatch {
namespace {

struct CopySpans {
  const uint32_t* src[3];
  uint32_t* dst[3];
  size_t words[3];
};

__global__ void pdl_delayed_copy_kernel(CopySpans c, long long delay_ns) {
  pdl_trigger();
  pdl_wait();  // a copy must not overwrite what the previous kernel still reads
  if (delay_ns > 0) {
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < uint64_t(delay_ns));
  }
  const size_t stride = size_t(gridDim.x) * blockDim.x, tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int i = 0; i < 3; ++i) {
    if (c.words[i] == 0) continue;
    const size_t vec = c.words[i] / 4;
    const uint4* s4 = reinterpret_cast<const uint4*>(c.src[i]);
    uint4* d4 = reinterpret_cast<uint4*>(c.dst[i]);
    for (size_t j = tid; j < vec; j += stride) d4[j] = s4[j];
    for (size_t j = vec * 4 + tid; j < c.words[i]; j += stride) c.dst[i][j] = c.src[i][j];
  }
}

}  // namespace

void pdl_delayed_copy(const void* const src[3], void* const dst[3], const size_t bytes[3], long long delay_ns,
                      cudaStream_t stream) {
  CopySpans c{};
  size_t most = 0;
  for (int i = 0; i < 3; ++i) {
    if (!src[i] || !dst[i] || bytes[i] == 0) continue;
    DK_CHECK(bytes[i] % 4 == 0, "pdl_delayed_copy: sizes must be multiples of 4 bytes");
    DK_CHECK((reinterpret_cast<uintptr_t>(src[i]) | reinterpret_cast<uintptr_t>(dst[i])) % 16 == 0,
             "pdl_delayed_copy: pointers must be 16-byte aligned");
    c.src[i] = static_cast<const uint32_t*>(src[i]);
    c.dst[i] = static_cast<uint32_t*>(dst[i]);
    c.words[i] = bytes[i] / 4;
    most = c.words[i] > most ? c.words[i] : most;
  }
  const size_t want = (most / 4 + 255) / 256;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(want < 1 ? 1 : want > 264 ? 264 : want));
  cfg.blockDim = dim3(256);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  DK_CUDA(cudaLaunchKernelEx(&cfg, pdl_delayed_copy_kernel, c, delay_ns));
  DK_LAUNCHED();
}

}  // namespace dispatch
