// Decode GEMV (T <= 8 tokens) built for HBM bandwidth; see gemv_fast.h for the contract.
//
// W is cut into strips of 8 rows; the strips are split evenly over a persistent grid of one
// 16-warp CTA per SM (at most one strip more on some CTAs). A warp's unit of work is one strip
// x 256 columns (4 KB): lane (g, c) = (lane / 4, lane % 4) loads row g's 16-byte vectors
// 4j + c, j = 0..7, so every load instruction reads 64 contiguous bytes of 8 rows, and a lane has
// 8 independent 16-byte loads per unit; the next unit's 8 are issued before the current unit is
// consumed (16 in flight per lane, 128 KB per SM). The first unit is issued before pdl_wait()
// (weights are never written); X, which the previous kernel produces, is copied to shared memory
// after it.
//
// The dot products run on the tensor cores: mma.sync m16n8k16 with A = X (tokens as rows, rows
// 8..15 zero) and B = W^T (8 rows of the strip as columns). Each lane's 16-byte W vector is two
// k-steps of B under a fixed permutation of k (a dot product does not depend on the order of
// its terms, and X is read under the same permutation), so no shuffles are needed: per 16 bytes
// of W a lane does one 16-byte shared load of X and two mma. Products of bf16 are exact in fp32
// and the sums are fp32, as in the CUDA-core GEMV; only the order of the additions differs.
//
// Few strips per CTA (S <= 16, e.g. qkv, o_proj): the CTA's units (strip, 256-column chunk) go
// round-robin over its 16 warps so all of them stream; each warp leaves its partial 8x8 block
// per strip in shared memory and the CTA adds the 16 partials in a fixed order (deterministic).
// Many strips (the LM head): each warp owns whole strips and writes Y itself.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include "check.h"
#include "fused_ops.h"
#include "gemv_fast.h"
#include "pdl.h"

namespace dcuda {
namespace {

constexpr int kMaxT = 8;
constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
constexpr int kLoads = 8;                   // 16-byte loads per lane per unit
constexpr int kChunkVecs = 4 * kLoads;      // 16-byte vectors per row per unit (256 columns)
constexpr int kStrip = 8;                   // rows per strip
constexpr int kSplitMaxStrips = 16;         // split mode up to this many strips per CTA
constexpr int kXPad = 32;                   // bf16 padding per X row in shared memory (bank spread)
constexpr int kMaxSmem = 200 * 1024;

struct Params {
  const bf16* X;
  const bf16* W;
  const float* bias;
  float* Y;
  int T, K, N;
  int strips;  // ceil(N / 8)
  bool accumulate;
  bool split;
  int part_strips;  // strips per CTA the partial buffer holds (split mode)
};

struct Unit {
  uint4 v[kLoads];
};

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(kThreads, 1) gemv_fast_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  pdl_trigger();
  const int T = p.T, K = p.K, N = p.N;
  const int kv = K / 8;                                  // 16-byte vectors per row
  const int C = (kv + kChunkVecs - 1) / kChunkVecs;      // chunks per strip
  const int xstride = K + kXPad;
  bf16* xs = reinterpret_cast<bf16*>(smem);
  float* part = reinterpret_cast<float*>(smem + size_t(T) * xstride * sizeof(bf16));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int s_begin = int(int64_t(blockIdx.x) * p.strips / gridDim.x);
  const int S = int(int64_t(blockIdx.x + 1) * p.strips / gridDim.x) - s_begin;
  const int units = S * C;
  const uint4* W4 = reinterpret_cast<const uint4*>(p.W);

  // unit u = strip * C + chunk; split: u = warp, warp + 16, ...; whole strips: strips warp,
  // warp + 16, ..., each with chunks 0..C-1
  auto next = [&](int u) {
    if (p.split) return u + kWarps;
    return (u % C == C - 1) ? u + 1 + (kWarps - 1) * C : u + 1;
  };
  auto issue = [&](Unit& b, int u) {
    const int s = u / C, ch = u - s * C;
    const int row = (s_begin + s) * kStrip + g;
    const uint4* w = W4 + size_t(min(row, N - 1)) * kv;
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int vi = ch * kChunkVecs + 4 * j + c;
      b.v[j] = row < N && vi < kv ? __ldcs(w + vi) : make_uint4(0, 0, 0, 0);
    }
  };

  int u = p.split ? warp : warp * C;
  Unit ua, ub;
  if (u < units) issue(ua, u);
  pdl_wait();

  // X -> shared memory (rows of K + kXPad bf16); the partial buffer zeroed
  {
    const uint4* X4 = reinterpret_cast<const uint4*>(p.X);
    for (int i = threadIdx.x; i < T * kv; i += kThreads) {
      const int t = i / kv, v = i - t * kv;
      *reinterpret_cast<uint4*>(xs + size_t(t) * xstride + v * 8) = X4[i];
    }
    if (p.split)
      for (int i = threadIdx.x; i < p.part_strips * kWarps * 64; i += kThreads) part[i] = 0.f;
  }
  __syncthreads();

  float d[4] = {0.f, 0.f, 0.f, 0.f};
  const bf16* xrow = xs + size_t(g) * xstride;
  auto consume = [&](const Unit& b, int u, int un) {
    const int s = u / C, ch = u - s * C;
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int v0 = ch * kChunkVecs + 4 * j;  // warp-uniform
      if (v0 >= kv) break;
      const int vi = v0 + c;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (g < T && vi < kv) x = *reinterpret_cast<const uint4*>(xrow + vi * 8);
      mma_bf16(d, x.x, x.y, b.v[j].x, b.v[j].y);
      mma_bf16(d, x.z, x.w, b.v[j].z, b.v[j].w);
    }
    if (un < units && un / C == s) return;  // this warp's next unit continues the strip
    // d[0], d[1]: token g, strip rows 2c and 2c + 1 (d[2], d[3]: tokens 8..15, zero)
    if (p.split) {
      *reinterpret_cast<float2*>(part + (size_t(s) * kWarps + warp) * 64 + g * 8 + 2 * c) = make_float2(d[0], d[1]);
    } else if (g < T) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int n = (s_begin + s) * kStrip + 2 * c + r;
        if (n < N) {
          const float v = d[r] + (p.bias ? p.bias[n] : 0.f);
          float* y = p.Y + size_t(g) * N + n;
          *y = p.accumulate ? *y + v : v;
        }
      }
    }
    d[0] = d[1] = d[2] = d[3] = 0.f;
  };

  while (u < units) {
    int un = next(u);
    if (un < units) issue(ub, un);
    consume(ua, u, un);
    u = un;
    if (u >= units) break;
    un = next(u);
    if (un < units) issue(ua, un);
    consume(ub, u, un);
    u = un;
  }

  if (p.split) {
    __syncthreads();
    for (int i = threadIdx.x; i < S * T * kStrip; i += kThreads) {
      const int s = i / (T * kStrip), rem = i - s * T * kStrip, t = rem / kStrip, r = rem - t * kStrip;
      const int n = (s_begin + s) * kStrip + r;
      if (n >= N) continue;
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += part[(size_t(s) * kWarps + w) * 64 + t * 8 + r];
      v += p.bias ? p.bias[n] : 0.f;
      float* y = p.Y + size_t(t) * N + n;
      *y = p.accumulate ? *y + v : v;
    }
  }
}

constexpr int kMaxDevices = 64;
std::atomic<int> g_sms[kMaxDevices];
std::atomic<bool> g_smem_set[kMaxDevices];

}  // namespace

bool gemv_fast_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_GEMV_LEGACY");
    return !(v != nullptr && v[0] == '1') && !legacy_kernels();
  }();
  return on;
}

bool gemv_fast(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y, bool accumulate,
               cudaStream_t s) {
  if (T < 1 || T > kMaxT || N < 1 || K < 8 || K % 8 != 0) return false;
  if ((reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 != 0) return false;
  const size_t xs_bytes = size_t(T) * (size_t(K) + kXPad) * sizeof(bf16);
  if (xs_bytes > size_t(kMaxSmem)) return false;
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  if (dev < 0 || dev >= kMaxDevices) return false;
  int sms = g_sms[dev].load(std::memory_order_relaxed);
  if (sms == 0) {
    DC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    g_sms[dev].store(sms, std::memory_order_relaxed);
  }
  const int strips = (N + kStrip - 1) / kStrip;
  const int grid = std::min(sms, strips);
  const int per_cta = (strips + grid - 1) / grid;
  const int chunks = (K / 8 + kChunkVecs - 1) / kChunkVecs;
  Params p{X, W, bias, Y, T, K, N, strips, accumulate, chunks > 1 && per_cta <= kSplitMaxStrips, per_cta};
  const size_t smem = xs_bytes + (p.split ? size_t(per_cta) * kWarps * 64 * sizeof(float) : 0);
  if (smem > size_t(kMaxSmem)) return false;
  if (!g_smem_set[dev].load(std::memory_order_acquire)) {
    DC_CUDA(cudaFuncSetAttribute(gemv_fast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    g_smem_set[dev].store(true, std::memory_order_release);
  }
  launch_k(gemv_fast_kernel, dim3(grid), dim3(kThreads), smem, s, p);
  DC_LAUNCHED();
  return true;
}

}  // namespace dcuda
