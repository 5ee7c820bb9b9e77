// int8 weight-only experts to bf16 for steps of more than 64 tokens (Model::expert_gemms_int8):
// every expert of a layer, per step, before the bf16 grouped GEMM.
//
// 16 values per thread and iteration: one 16-byte streaming load of int8 (K % 16 == 0, so a chunk
// never straddles rows and takes one scale), two 16-byte stores of bf16; the same arithmetic as
// ops.cu's scalar dequant_int8 (`__float2bfloat16(float(q) * scale)`), so the bits are identical.
// The scalar kernel issued byte loads and a 64-bit division per value: on the H200 the int8
// prefill's dequantization ran at ~1/3 of HBM (TTFT at concurrency 1: 85 ms against 26 ms in
// bf16, session 4 serving run). DISPATCH_CUDA_DEQUANT_SCALAR=1 keeps the scalar kernel.
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include "check.h"
#include "dequant.h"

namespace dcuda {
namespace {

__global__ void __launch_bounds__(256) dequant_int8_vec_kernel(const int4* __restrict__ q, const float* __restrict__ scale,
                                                               size_t chunks, int chunks_per_row, int4* __restrict__ w) {
  for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < chunks; c += size_t(gridDim.x) * blockDim.x) {
    const int4 v = __ldcs(q + c);  // read once: keep it out of L2's way
    const float sc = __ldg(scale + c / chunks_per_row);
    const int8_t* b = reinterpret_cast<const int8_t*>(&v);
    alignas(16) bf16 out[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) out[j] = __float2bfloat16(float(b[j]) * sc);
    w[2 * c] = reinterpret_cast<const int4*>(out)[0];
    w[2 * c + 1] = reinterpret_cast<const int4*>(out)[1];
  }
}

}  // namespace

void dequant_int8_rows(const int8_t* q, const float* scale, size_t rows, int K, bf16* w, cudaStream_t s) {
  if (rows == 0) return;
  static const bool scalar = [] {
    const char* v = std::getenv("DISPATCH_CUDA_DEQUANT_SCALAR");
    return v && v[0] == '1';
  }();
  const bool vec = !scalar && K % 16 == 0 && (reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(w)) % 16 == 0;
  if (!vec) {
    dequant_int8(q, scale, rows, K, w, s);
    return;
  }
  const size_t chunks = rows * size_t(K) / 16;
  // up to 16 blocks of 256 threads per SM of a 132-SM H200, each thread looping over chunks
  const size_t blocks = std::min<size_t>((chunks + 255) / 256, size_t(132) * 16);
  dequant_int8_vec_kernel<<<unsigned(blocks), 256, 0, s>>>(reinterpret_cast<const int4*>(q), scale, chunks, K / 16,
                                                            reinterpret_cast<int4*>(w));
  DC_LAUNCHED();
}

}  // namespace dcuda
