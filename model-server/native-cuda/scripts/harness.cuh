// Pieces the standalone GPU harnesses in this folder share (attention_check.cu, prefill_check.cu,
// gemv_check.cu, gemm_bench.cu): a CUDA error check that exits 2, bf16 <-> float on the host, a
// hashed uniform bf16 fill on the device, the fp64 paged-attention reference of one query row,
// the |err| <= atol + rtol |ref| tally, and the "cold" timing (median of launches, each after a
// memset that evicts L2). Each harness is one translation unit that includes this once.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

// Any CUDA error: file:line, the call and the message on stderr, then exit status 2.
#define HARNESS_CK(call)                                                                            \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                 \
    }                                                                                               \
  } while (0)

namespace harness {
namespace {

inline float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

__host__ __device__ inline uint32_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return uint32_t((x ^ (x >> 31)) >> 32);
}

// p[i] uniform in [-1, 1) from mix(seed, i): the same values for the same seed on every launch shape.
__global__ void fill_uniform_bf16(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(float(mix(seed * 0x100000001b3ull + i)) * (2.f / 4294967296.f) - 1.f);
}

// fp64 attention of one query row over a paged bf16 cache: out[h * D + d] for h < Hq. q: the row's
// Hq * D fp32 queries; table: its sequence's block table; k, v: host copies of the caches
// ([block][B][Hkv][D] bf16 bits); keys lo..pos are visible; scale 1 / sqrt(D).
inline void attention_reference_row(const float* q, int pos, int lo, const int32_t* table, const std::vector<uint16_t>& k,
                                    const std::vector<uint16_t>& v, int B, int Hq, int Hkv, int D, double* out) {
  const int G = Hq / Hkv;
  std::vector<double> s(pos - lo + 1), acc(D);
  for (int h = 0; h < Hq; ++h) {
    const int kvh = h / G;
    const float* qh = q + size_t(h) * D;
    double mx = -1e300;
    for (int j = lo; j <= pos; ++j) {
      const size_t base = ((size_t(table[j / B]) * B + j % B) * Hkv + kvh) * D;
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += double(qh[d]) * bf16_to_float(k[base + d]);
      s[j - lo] = dot / std::sqrt(double(D));
      mx = std::max(mx, s[j - lo]);
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    double sum = 0;
    for (int j = lo; j <= pos; ++j) {
      const size_t base = ((size_t(table[j / B]) * B + j % B) * Hkv + kvh) * D;
      const double w = std::exp(s[j - lo] - mx);
      sum += w;
      for (int d = 0; d < D; ++d) acc[d] += w * bf16_to_float(v[base + d]);
    }
    for (int d = 0; d < D; ++d) out[size_t(h) * D + d] = acc[d] / sum;
  }
}

// Largest |got - ref| seen (NaN counts as infinite) and whether every one was within its bound
// (NaN fails): add_err with the bound given, add with atol + rtol |ref|.
struct Tally {
  double worst = 0;
  bool ok = true;
  void add_err(double err, double bound) {
    if (!(err <= bound)) ok = false;
    if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
  }
  void add(double got, double ref, double atol, double rtol) { add_err(std::fabs(got - ref), atol + rtol * std::fabs(ref)); }
};

// Median us of `iters` runs of launch() on s, each after a memset of `flush` (flush_bytes, sized
// past the L2) so the launch starts with a cold L2; CUDA events e0 / e1 around the launch alone.
template <typename F>
float cold_median_us(F&& launch, void* flush, size_t flush_bytes, cudaStream_t s, int iters, cudaEvent_t e0, cudaEvent_t e1) {
  std::vector<float> v;
  for (int i = 0; i < iters; ++i) {
    HARNESS_CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, s));
    HARNESS_CK(cudaEventRecord(e0, s));
    launch();
    HARNESS_CK(cudaEventRecord(e1, s));
    HARNESS_CK(cudaEventSynchronize(e1));
    float ms = 0;
    HARNESS_CK(cudaEventElapsedTime(&ms, e0, e1));
    v.push_back(ms * 1000.f);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs f(i) for i in [0, n) on every core (host-side references).
inline void parallel_for(int n, const std::function<void(int)>& f) {
  const int nt = std::max(1, std::min(n, int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int w = 0; w < nt; ++w)
    pool.emplace_back([&, w] {
      for (int i = w; i < n; i += nt) f(i);
    });
  for (auto& th : pool) th.join();
}

}  // namespace
}  // namespace harness
