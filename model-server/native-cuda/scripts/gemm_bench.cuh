// Shared by the dense GEMM harness: gemm_bench.cu (paths, timing, main) and gemm_bench_splitk.cu
// (split K, determinism, graph capture). gemm-bench.sh builds both with src/gemm.cu.
#pragma once
#include <algorithm>
#include <cmath>
#include <exception>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "gemm.h"
#include "harness.cuh"

namespace dcuda {
extern bool g_bench_pdl;  // gemm_bench.cu: PDL on while the pdl_us graphs are captured
}  // namespace dcuda

namespace gemm_bench {

using dcuda::bf16;
using dcuda::GemmPath;
#define CK(call) HARNESS_CK(call)

namespace {  // the kernels: one copy in each translation unit

__global__ void fill_bf16(bf16* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16((float(h & 0xffffff) / 16777216.f - 0.5f) * scale);
  }
}

__global__ void fill_f32(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2246822519u ^ seed;
    h ^= h >> 16, h *= 2654435761u, h ^= h >> 13;
    p[i] = float(h & 0xffff) / 65536.f - 0.5f;
  }
}

// ref[t, n] = y0 + bias + sum_k x w (fp32), mag = |y0| + |bias| + sum_k |x w|: 32x32 outputs per
// block through shared-memory tiles of X and W (plain FMA loops, nothing shared with gemm.cu).
__global__ void __launch_bounds__(1024) reference(const bf16* X, int T, int K, const bf16* W, int N,
                                                  const float* bias, const float* y0, float* ref, float* mag) {
  __shared__ float sx[32][33], sw[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int n = blockIdx.x * 32 + tx, t = blockIdx.y * 32 + ty;
  float s = 0.f, m = 0.f;
  for (int k0 = 0; k0 < K; k0 += 32) {
    const int tr = blockIdx.y * 32 + ty, nr = blockIdx.x * 32 + ty;
    sx[ty][tx] = tr < T && k0 + tx < K ? __bfloat162float(X[size_t(tr) * K + k0 + tx]) : 0.f;
    sw[ty][tx] = nr < N && k0 + tx < K ? __bfloat162float(W[size_t(nr) * K + k0 + tx]) : 0.f;
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < 32; ++k) {
      const float p = sx[ty][k] * sw[tx][k];
      s += p, m += fabsf(p);
    }
    __syncthreads();
  }
  if (t >= T || n >= N) return;
  const size_t i = size_t(t) * N + n;
  const float b = bias ? bias[n] : 0.f, y = y0 ? y0[i] : 0.f;
  ref[i] = s + b + y;
  mag[i] = m + fabsf(b) + fabsf(y) + 1e-6f;
}

}  // namespace

inline const char* name(GemmPath p) {
  switch (p) {
    case GemmPath::Gemv: return "gemv";
    case GemmPath::Legacy: return "legacy";
    case GemmPath::Skinny: return "skinny";
    case GemmPath::SkinnyAsync: return "skinnyA";
    case GemmPath::Stream: return "stream";
    case GemmPath::Tiled: return "tiled";
    case GemmPath::TiledWide: return "tiled256";
    case GemmPath::Skinny2: return "skinny2";
    case GemmPath::Wgmma: return "wgmma";
    default: return "auto";
  }
}

inline int grid_for(size_t n) { return int(std::min<size_t>((n + 255) / 256, 4096)); }

struct Shape {
  const char* what;
  int K, N;
};

// Median us of `iters` launches, each alone between two events on stream 0 (the host's launch
// latency counts), after 3 untimed ones; launch(it) gets it = -3 .. iters - 1.
template <typename F>
double median_launch_us(int iters, F&& launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int it = -3; it < iters; ++it) {
    CK(cudaEventRecord(e0));
    launch(it);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (it >= 0) ms.push_back(t);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}

enum class Section { All, Decode, Prefill };
// The split-K section (gemm_bench_splitk.cu); its comment there says what it checks.
int splitk_section(const cudaDeviceProp& prop, Section mode);

}  // namespace gemm_bench
