// Dense Y (+)= X . W^T (+ bias) with bf16 operands and fp32 output (see ops.h). Paths chosen
// by T alone (so one captured graph always replays one path):
//   T <= 8:     bandwidth-bound GEMV: a warp per output row (two when T >= 4 and N is large) reads
//               W's row once, 8 16-byte loads per lane in flight, and dots it with every token's
//               row (decode). DISPATCH_CUDA_UNFUSED=1: the earlier GEMV (one load per step, unroll 4).
//   8 < T <= 64: gemm_stream.cuh's streaming GEMM (cp.async ring of W and X tiles, K split over
//               thread-block clusters and reduced through distributed shared memory: no atomics,
//               same bits run to run). DISPATCH_CUDA_SKINNY_V2=0: gemm_mma.cuh's earlier skinny
//               mma.sync GEMM: W streamed once into registers (or, with DISPATCH_CUDA_GEMM_SKINNY=
//               async, through a cp.async ring), split K across CTAs with fp32 atomics.
//   T > 64:     gemm_mma.cuh's 128x128 cp.async + ldmatrix + mma.sync tiles (prefill).
//   gemm_skinny2.cuh (TMA ring of W and X tiles, wgmma, K split over a cluster and reduced in
//               distributed shared memory; deterministic) takes 9 <= T <= 64 ahead of the stream
//               GEMM, and the LM head at 4 <= T <= 8 (H200 figures at the dispatch below);
//               DISPATCH_CUDA_GEMM_SKINNY2=1: every T <= 64, =0: never.
//   gemm_wgmma_tiled.cuh (TMA ring + wgmma m64n256k16 / m64n128k16, warp-specialized, persistent,
//               no split K; deterministic) takes T > 64 instead of the 128x128 mma.sync tiles
//               (H200, 23:33 UTC: q|k|v 2.1-2.3x, o 2.0-2.5x, LM head 2.4-2.6x at 512-8192 tokens);
//               DISPATCH_CUDA_GEMM_WGMMA=0 keeps the tiles.
//   The two tensor-core paths need K % 8 == 0 and 16-byte aligned X and W; other shapes, and every
//   T > 8 under DISPATCH_CUDA_GEMM_LEGACY=1, take the earlier WMMA tiles (64x64 per CTA, bounds-
//   checked so any shape works; when the tiles alone would not fill the GPU, K is split across
//   CTAs whose partial sums the tile's last CTA adds in a fixed order: gemm_splitk.cuh;
//   DISPATCH_CUDA_GEMM_ATOMIC_SPLITK=1: fp32 atomics into Y, zeroed first unless accumulating).
// cuBLAS is not on the build machines (no package in the registries this project may use), so
// the LM head and projections use these; docs/cuda-backend.md lists the measured cost.
#include <mma.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#include "check.h"
#include "fused_ops.h"
#include "gemm.h"
#include "gemm_mma.cuh"
#include "gemm_skinny2.cuh"
#include "gemm_stream.cuh"
#include "gemm_wgmma_tiled.cuh"
#include "gemv_core.cuh"
#include "gemv_fast.h"
#include "ops.h"
#include "pdl.h"

namespace dcuda {
namespace {

using gemv::gemv_dot;
using gemv::unpack8;
using gemv::warp_sum;

constexpr int kGemvMaxT = 8;
constexpr int kGemvWarps = 8;

template <int TT, bool kVec>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const bf16* __restrict__ X, int K,
                                                                const bf16* __restrict__ W, int N,
                                                                const float* __restrict__ bias, float* __restrict__ Y,
                                                                bool accumulate) {
  const int n = blockIdx.x * kGemvWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.f;
  const bf16* w = W + size_t(n) * K;
  if (kVec) {
#pragma unroll 4
    for (int k = lane * 8; k < K; k += 32 * 8) {
      float wf[8];
      unpack8(*reinterpret_cast<const uint4*>(w + k), wf);
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        float xf[8];
        unpack8(*reinterpret_cast<const uint4*>(X + size_t(t) * K + k), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[t] += wf[i] * xf[i];
      }
    }
  } else {
    for (int k = lane; k < K; k += 32) {
      const float wv = __bfloat162float(w[k]);
#pragma unroll
      for (int t = 0; t < TT; ++t) acc[t] += wv * __bfloat162float(X[size_t(t) * K + k]);
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    const float s = warp_sum(acc[t]) + (bias ? bias[n] : 0.f);
    if (lane == 0) {
      float* y = Y + size_t(t) * N + n;
      *y = accumulate ? *y + s : s;
    }
  }
}

// Vector GEMV (K % 8 == 0, 16-byte aligned): a warp owns R consecutive rows and walks K in
// chunks of 32 lanes x 8 columns x U, issuing all R*U 16-byte weight loads of a chunk before the
// first FMA (R*U = 8: 128 bytes per lane in flight). Each token's 8 columns of X are loaded
// once per chunk step and used for all R rows (at T = 8, R = 2 halves X's L1 traffic).
constexpr int kGemv2Warps = 8;

template <int TT, int R>
__global__ void __launch_bounds__(kGemv2Warps * 32) gemv_vec_kernel(const bf16* __restrict__ X, int K,
                                                                     const bf16* __restrict__ W, int N,
                                                                     const float* __restrict__ bias,
                                                                     float* __restrict__ Y, bool accumulate) {
  pdl_trigger();
  const int n0 = (blockIdx.x * kGemv2Warps + (threadIdx.x >> 5)) * R;
  const int lane = threadIdx.x & 31;
  if (n0 >= N) return pdl_wait();
  const uint4* w[R];
#pragma unroll
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const uint4*>(W + size_t(min(n0 + r, N - 1)) * K);
  float acc[R][TT];
  gemv_dot<TT, R>(w, reinterpret_cast<const uint4*>(X), K / 8, lane, acc);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int n = n0 + r;
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const float s = warp_sum(acc[r][t]) + (bias && n < N ? bias[n] : 0.f);
      if (lane == 0 && n < N) {
        float* y = Y + size_t(t) * N + n;
        *y = accumulate ? *y + s : s;
      }
    }
  }
}

// act[t, n] = silu(X[t] . W[n]) * (X[t] . W[I + n]) as bf16: the gate/up GEMV and silu_mul_f32 in
// one launch (a warp reads gate row n and up row I + n together).
template <int TT>
__global__ void __launch_bounds__(kGemv2Warps * 32) gemv_silu_kernel(const bf16* __restrict__ X, int K,
                                                                      const bf16* __restrict__ W, int I,
                                                                      bf16* __restrict__ act) {
  pdl_trigger();
  const int n = blockIdx.x * kGemv2Warps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (n >= I) return pdl_wait();
  const uint4* w[2] = {reinterpret_cast<const uint4*>(W + size_t(n) * K),
                       reinterpret_cast<const uint4*>(W + size_t(I + n) * K)};
  float acc[2][TT];
  gemv_dot<TT, 2>(w, reinterpret_cast<const uint4*>(X), K / 8, lane, acc);
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    const float g = warp_sum(acc[0][t]), u = warp_sum(acc[1][t]);
    if (lane == 0) act[size_t(t) * I + n] = __float2bfloat16(g / (1.f + expf(-g)) * u);
  }
}

template <int TT>
void launch_gemv(const bf16* X, int K, const bf16* W, int N, const float* bias, float* Y, bool acc, cudaStream_t s) {
  const bool vec = K % 8 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0;
  if (vec && !legacy_kernels()) {
    // two rows per warp where X's reuse pays (T >= 4) and the grid still covers the GPU twice
    const bool two = TT >= 4 && (N + 2 * kGemv2Warps - 1) / (2 * kGemv2Warps) >= 264;
    if (two) {
      launch_k(gemv_vec_kernel<TT, 2>, dim3((N + 2 * kGemv2Warps - 1) / (2 * kGemv2Warps)), dim3(kGemv2Warps * 32), 0,
               s, X, K, W, N, bias, Y, acc);
    } else {
      launch_k(gemv_vec_kernel<TT, 1>, dim3((N + kGemv2Warps - 1) / kGemv2Warps), dim3(kGemv2Warps * 32), 0, s, X, K,
               W, N, bias, Y, acc);
    }
    return;
  }
  const int grid = (N + kGemvWarps - 1) / kGemvWarps;
  if (vec) gemv_kernel<TT, true><<<grid, kGemvWarps * 32, 0, s>>>(X, K, W, N, bias, Y, acc);
  else gemv_kernel<TT, false><<<grid, kGemvWarps * 32, 0, s>>>(X, K, W, N, bias, Y, acc);
}

// WMMA tile: CTA 64 (T) x 64 (N), K step 32, 4 warps each 32x32 (2x2 fragments).
constexpr int kBM = 64, kBN = 64, kBK = 32, kPad = 8;
constexpr int kTargetCtas = 264;

__global__ void __launch_bounds__(128) wmma_gemm_kernel(const bf16* __restrict__ X, int T, int K,
                                                         const bf16* __restrict__ W, int N,
                                                         const float* __restrict__ bias, float* __restrict__ Y,
                                                         bool accumulate, int k_chunk, mma::SplitK sk) {
  using namespace nvcuda;
  __shared__ __align__(32) bf16 sA[kBM][kBK + kPad];
  __shared__ __align__(32) bf16 sB[kBN][kBK + kPad];
  __shared__ __align__(32) float sC[kBM][kBN + 4];
  const int m0 = blockIdx.y * kBM;
  const int n0 = blockIdx.x * kBN;
  const int warp = threadIdx.x >> 5;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  const bool vec = K % 8 == 0;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(c[i][j], 0.f);

  const int k_begin = blockIdx.z * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  const bool split = gridDim.z > 1;
  for (int k0 = k_begin; k0 < k_end; k0 += kBK) {
    // 64 rows x 32 cols = 256 chunks of 8 per matrix; 128 threads take 2 each.
    for (int chunk = threadIdx.x; chunk < kBM * kBK / 8; chunk += blockDim.x) {
      const int r = chunk / (kBK / 8);
      const int cc = (chunk % (kBK / 8)) * 8;
      const int k = k0 + cc;
      const int gm = m0 + r, gn = n0 + r;
      if (vec && k + 8 <= k_end) {
        uint4 a = make_uint4(0, 0, 0, 0), b = make_uint4(0, 0, 0, 0);
        if (gm < T) a = *reinterpret_cast<const uint4*>(X + size_t(gm) * K + k);
        if (gn < N) b = *reinterpret_cast<const uint4*>(W + size_t(gn) * K + k);
        *reinterpret_cast<uint4*>(&sA[r][cc]) = a;
        *reinterpret_cast<uint4*>(&sB[r][cc]) = b;
      } else {
        for (int i = 0; i < 8; ++i) {
          const bool in = k + i < k_end;
          sA[r][cc + i] = gm < T && in ? X[size_t(gm) * K + k + i] : __float2bfloat16(0.f);
          sB[r][cc + i] = gn < N && in ? W[size_t(gn) * K + k + i] : __float2bfloat16(0.f);
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &sA[wm + 16 * i][kk], kBK + kPad);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &sB[wn + 16 * j][kk], kBK + kPad);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(c[i][j], fa[i], fb[j], c[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&sC[wm + 16 * i][wn + 16 * j], c[i][j], kBN + 4, wmma::mem_row_major);
  __syncthreads();
  if (sk.ws != nullptr) {  // deterministic split K (gemm_splitk.cuh)
    const int z = blockIdx.z, S = gridDim.z;
    for (int e = threadIdx.x; e < kBM * kBN; e += blockDim.x) {
      const int gm = m0 + e / kBN, gn = n0 + e % kBN;
      if (gm < T && gn < N) __stcg(sk.ws + (size_t(z) * T + gm) * N + gn, sC[e / kBN][e % kBN]);
    }
    if (!mma::splitk_last(sk.counters + blockIdx.y * gridDim.x + blockIdx.x, S)) return;
    for (int e = threadIdx.x; e < kBM * kBN; e += blockDim.x) {
      const int r = e / kBN, col = e % kBN;
      const int gm = m0 + r, gn = n0 + col;
      if (gm >= T || gn >= N) continue;
      float v = 0.f;
      for (int q = 0; q < S; ++q) {
        const float p = q == z ? sC[r][col] : __ldcg(sk.ws + (size_t(q) * T + gm) * N + gn);
        v = q == 0 ? p : v + p;
      }
      if (bias) v += bias[gn];
      float* y = Y + size_t(gm) * N + gn;
      *y = accumulate ? *y + v : v;
    }
    return;
  }
  for (int e = threadIdx.x; e < kBM * kBN; e += blockDim.x) {
    const int r = e / kBN, col = e % kBN;
    const int gm = m0 + r, gn = n0 + col;
    if (gm >= T || gn >= N) continue;
    const float v = sC[r][col] + (bias && blockIdx.z == 0 ? bias[gn] : 0.f);
    float* y = Y + size_t(gm) * N + gn;
    if (split) atomicAdd(y, v);
    else *y = accumulate ? *y + v : v;
  }
}

template <int TT>
void launch_gemv_silu(const bf16* X, int K, const bf16* W, int I, bf16* act, cudaStream_t s) {
  launch_k(gemv_silu_kernel<TT>, dim3((I + kGemv2Warps - 1) / kGemv2Warps), dim3(kGemv2Warps * 32), 0, s, X, K, W, I,
           act);
}

}  // namespace

bool gemm_silu(const bf16* X, int T, int K, const bf16* W, int I, bf16* act, cudaStream_t s) {
  const bool vec = K % 8 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0;
  if (T < 1 || T > kGemvMaxT || !vec || I <= 0 || legacy_kernels()) return false;
  switch (T) {
    case 1: launch_gemv_silu<1>(X, K, W, I, act, s); break;
    case 2: launch_gemv_silu<2>(X, K, W, I, act, s); break;
    case 3: launch_gemv_silu<3>(X, K, W, I, act, s); break;
    case 4: launch_gemv_silu<4>(X, K, W, I, act, s); break;
    case 5: launch_gemv_silu<5>(X, K, W, I, act, s); break;
    case 6: launch_gemv_silu<6>(X, K, W, I, act, s); break;
    case 7: launch_gemv_silu<7>(X, K, W, I, act, s); break;
    default: launch_gemv_silu<kGemvMaxT>(X, K, W, I, act, s); break;
  }
  DC_LAUNCHED();
  return true;
}

namespace {

void launch_legacy(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y, bool accumulate,
                   cudaStream_t s) {
  const int tiles = ((N + kBN - 1) / kBN) * ((T + kBM - 1) / kBM);
  const int k_steps = (K + kBK - 1) / kBK;
  // enough CTAs for ~2 waves of 132 SMs, each split at least 4 K steps long
  int splits = std::max(1, std::min((kTargetCtas + tiles - 1) / tiles, k_steps / 4));
  const int k_chunk = ((k_steps + splits - 1) / splits) * kBK;
  splits = (K + k_chunk - 1) / k_chunk;
  const bool atomic = splits > 1 && mma::atomic_splitk();
  if (atomic && !accumulate) DC_CUDA(cudaMemsetAsync(Y, 0, size_t(T) * N * sizeof(float), s));
  dim3 grid((N + kBN - 1) / kBN, (T + kBM - 1) / kBM, splits);
  const mma::SplitK sk = splits > 1 && !atomic
                             ? mma::splitk_workspace(size_t(splits) * T * N, size_t(grid.x) * grid.y, s)
                             : mma::SplitK{};
  wmma_gemm_kernel<<<grid, 128, 0, s>>>(X, T, K, W, N, bias, Y, accumulate, k_chunk, sk);
}

void launch_gemv_any(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y, bool accumulate,
                     cudaStream_t s) {
  switch (T) {
    case 1: launch_gemv<1>(X, K, W, N, bias, Y, accumulate, s); break;
    case 2: launch_gemv<2>(X, K, W, N, bias, Y, accumulate, s); break;
    case 3: launch_gemv<3>(X, K, W, N, bias, Y, accumulate, s); break;
    case 4: launch_gemv<4>(X, K, W, N, bias, Y, accumulate, s); break;
    case 5: launch_gemv<5>(X, K, W, N, bias, Y, accumulate, s); break;
    case 6: launch_gemv<6>(X, K, W, N, bias, Y, accumulate, s); break;
    case 7: launch_gemv<7>(X, K, W, N, bias, Y, accumulate, s); break;
    default: launch_gemv<kGemvMaxT>(X, K, W, N, bias, Y, accumulate, s); break;
  }
}

// Split-K workspaces per (device, stream): a stream's launches run one after another (split
// launches go without PDL), so one workspace and one set of counters serve them all.
struct SplitkBuffers {
  float* ws = nullptr;
  unsigned* counters = nullptr;
  size_t floats = 0, tiles = 0;
};
std::mutex g_splitk_mu;
std::map<std::pair<int, cudaStream_t>, SplitkBuffers> g_splitk;
std::vector<void*> g_splitk_retired;  // replaced buffers, never freed: a captured graph may point at them
std::atomic<int> g_atomic_override{-1};

}  // namespace

namespace mma {

bool atomic_splitk() {
  static const bool env = [] {
    const char* v = std::getenv("DISPATCH_CUDA_GEMM_ATOMIC_SPLITK");
    return v != nullptr && v[0] == '1';
  }();
  const int o = g_atomic_override.load();
  return o < 0 ? env : o == 1;
}

// At least 32 MB and 4096 counters on first use (every Auto split launch at the model's shapes
// fits: its CTAs x tile size stay near the resident CTAs' outputs), so a later capture rarely
// has to grow it; then doubled as needed.
SplitK splitk_workspace(size_t floats, size_t tiles, cudaStream_t s) {
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(g_splitk_mu);
  SplitkBuffers& b = g_splitk[{dev, s}];
  if (b.floats < floats || b.tiles < tiles) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    DC_CUDA(cudaStreamIsCapturing(s, &status));
    DC_CHECK(status == cudaStreamCaptureStatusNone,
             "gemm: the split-K workspace must grow for this shape, but the stream is capturing a CUDA graph; run "
             "one step of this shape eagerly before capturing (or set DISPATCH_CUDA_GEMM_ATOMIC_SPLITK=1)");
    if (b.ws) g_splitk_retired.insert(g_splitk_retired.end(), {b.ws, b.counters});
    const size_t nf = std::max({floats, 2 * b.floats, size_t(8) << 20});
    const size_t nt = std::max({tiles, 2 * b.tiles, size_t(4096)});
    b = SplitkBuffers{};
    DC_CUDA(cudaMalloc(&b.ws, nf * sizeof(float)));
    DC_CUDA(cudaMalloc(&b.counters, nt * sizeof(unsigned)));
    DC_CUDA(cudaMemsetAsync(b.counters, 0, nt * sizeof(unsigned), s));
    b.floats = nf, b.tiles = nt;
  }
  return SplitK{b.ws, b.counters};
}

}  // namespace mma

void gemm_set_atomic_splitk(int mode) { g_atomic_override.store(mode < 0 ? -1 : mode ? 1 : 0); }

int gemm_stream_mode() {
  static const int mode = [] {
    const char* v = std::getenv("DISPATCH_CUDA_SKINNY_V2");
    if (v == nullptr || v[0] == '\0') return 1;
    const std::string s(v);
    return s == "0" ? 0 : s == "all" ? 2 : 1;
  }();
  return mode;
}

void gemm_stream_info(int T, int K, int N, int* cluster, int* ctas_per_sm, int* max_clusters) {
  DC_CHECK(T > 0 && T <= 64 && K > 0 && N > 0, "gemm_stream_info: T must be 1..64, K and N > 0");
  mma::stream_info(T, K, N, *cluster, *ctas_per_sm, *max_clusters);
}

int gemm_skinny2_mode() {
  static const int mode = [] {
    const char* v = std::getenv("DISPATCH_CUDA_GEMM_SKINNY2");
    if (v && v[0] == '0') return 0;
    if (v && v[0] == '1') return 2;
    return 1;
  }();
  return mode;
}

void gemm_skinny2_info(int T, int K, int N, int* splits, int* ctas, int* stages, int* smem_bytes) {
  DC_CHECK(T > 0 && T <= 64 && K > 0 && N > 0, "gemm_skinny2_info: T must be 1..64, K and N > 0");
  mma::skinny2_info(T, K, N, *splits, *ctas, *stages, *smem_bytes);
}

bool gemm_wgmma_mode() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_GEMM_WGMMA");
    return !(v != nullptr && v[0] == '0');
  }();
  return on;
}

void gemm_wgmma_info(int T, int K, int N, int splits, int* bn, int* tiles, int* ctas, int* stages, int* smem_bytes) {
  DC_CHECK(T > 0 && K > 0 && N > 0, "gemm_wgmma_info: T, K and N must be > 0");
  const mma::WgmmaPlan p = mma::wgmma_plan(T, K, N, splits);
  *bn = p.bn, *tiles = p.m_tiles * p.n_tiles, *ctas = p.ctas, *stages = p.stages, *smem_bytes = p.smem;
}

bool gemm_legacy() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_GEMM_LEGACY");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}

void gemm_path(GemmPath path, int splits, const bf16* X, int T, int K, const bf16* W, int N, const float* bias,
               float* Y, bool accumulate, cudaStream_t s) {
  DC_CHECK(T >= 0 && K > 0 && N >= 0, "gemm: T, N must be >= 0 and K > 0");
  if (T == 0 || N == 0) return;
  const bool mma_ok = K % 8 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0;
  // GemmPath::Stream (gemm_stream.cuh) at 9 <= T <= 64 by default, and at T <= 8 for outputs of
  // <= kStreamMaxGemvN rows: there the GEMVs' warp-per-row grids keep too few bytes in flight while
  // the stream GEMM splits K over a cluster (H200, 20:40 UTC, Qwen3-30B-A3B batch 1 in a graph: the
  // o projection, N 2048, cost 0.43 ms of the step with the GEMV, 0.275 ms with the stream GEMM; all
  // shapes on the stream GEMM at T <= 8 lost that gain elsewhere: q|k|v N 5120, LM head).
  // DISPATCH_CUDA_SKINNY_V2=0 gives all of it back to Skinny / the GEMVs, =all takes every T <= 8.
  constexpr int kStreamMaxGemvN = 4096;
  // gemm_skinny2.cuh (TMA ring + wgmma) by default at 2 <= T <= 64. H200, 23:12 UTC (session 4), gemm-bench
  // --decode, in a graph with PDL: q|k|v T=64 9.9 us vs the stream GEMM's 14.7, o 10.5 vs 14.0, T=16 8.4 vs 8.9;
  // LM head T=4 142.7 vs the GEMV's 153.8, T=64 162.4 vs 209.6; at T=1 the GEMVs / stream stay as fast or faster
  // (q|k|v 8.0 vs 8.1 GEMV, o 7.4 vs 7.0 stream, LM head 141.2 vs 137.3). Until session 11 the rule was 9-64 (and
  // the LM head at 4-8); whole Qwen3-30B-A3B decode steps with skinny2 at every T then (H200, 2026-12-02 03:50 UTC,
  // three interleaved pairs, docs/cuda-backend.md "Session 11 runs"): batch 2 4.134-4.220 vs 4.246-4.352 ms, batch
  // 4 5.659-5.716 vs 5.866-5.929, batch 8 8.367-8.459 vs 8.670-8.698; batch 1 3.384 vs 3.241-3.332 (kept off there).
  // DISPATCH_CUDA_GEMM_SKINNY2=1: every T <= 64; =0: never.
  const int sk2 = gemm_skinny2_mode();
  // gemm_wgmma_tiled.cuh at T > 64 (DISPATCH_CUDA_GEMM_WGMMA=0: the mma.sync tiles below). H200,
  // gemm-bench --prefill (23:33 UTC): q|k|v 512 / 2048 / 8192 tokens 35.1 / 93.6 / 276.3 us against
  // 72.6 / 172.9 / 636.1 (622 TFLOP/s at 8192), o 40.3 / 56.0 / 203.5 against 80.8 / 134.7 / 506.4.
  if (path == GemmPath::Auto && mma_ok && T > 64 && !gemm_legacy() && gemm_wgmma_mode()) path = GemmPath::Wgmma;
  if (path == GemmPath::Auto && mma_ok && T <= 64 && !gemm_legacy() &&
      (sk2 == 2 || (sk2 == 1 && T >= 2)))
    path = GemmPath::Skinny2;
  if (path == GemmPath::Auto && mma_ok && T <= 64 && !gemm_legacy() &&
      (gemm_stream_mode() == 2 || (gemm_stream_mode() == 1 && (T > kGemvMaxT || N <= kStreamMaxGemvN))))
    path = GemmPath::Stream;
  // 4 <= T <= 8: gemv_fast.cu's persistent tensor-core GEMV when it takes the shape (GemmPath::Gemv
  // names the earlier kernels below; DISPATCH_CUDA_GEMV_LEGACY=1 or DISPATCH_CUDA_UNFUSED=1 keeps
  // them for Auto too). On the H200 (gemv-check.sh, 18:30 UTC, in a graph) it took ~9 us at every
  // T for qkv against the earlier GEMV's 7.6 us at T = 1 and 11.8 / 15.7 us at T = 4 / 8, and the
  // LM head 153 us against 138 / 182 / 278; T = 2, 3 were not timed, so they keep the earlier GEMV.
  if (path == GemmPath::Auto && T >= 4 && T <= kGemvMaxT && gemv_fast_enabled() &&
      gemv_fast(X, T, K, W, N, bias, Y, accumulate, s))
    return;
  static const bool skinny_async = [] {
    const char* v = std::getenv("DISPATCH_CUDA_GEMM_SKINNY");
    return v != nullptr && std::string(v) == "async";
  }();
  if (path == GemmPath::Auto) {
    path = T <= kGemvMaxT ? GemmPath::Gemv
           : gemm_legacy() ? GemmPath::Legacy
           : T <= 64       ? (skinny_async ? GemmPath::SkinnyAsync : GemmPath::Skinny)
                           : GemmPath::Tiled;
  }
  if (path == GemmPath::Gemv && T > kGemvMaxT) path = GemmPath::Legacy;
  const bool skinny = path == GemmPath::Skinny || path == GemmPath::SkinnyAsync || path == GemmPath::Stream ||
                      path == GemmPath::Skinny2;
  const bool mma_path = skinny || path == GemmPath::Tiled || path == GemmPath::TiledWide || path == GemmPath::Wgmma;
  if ((skinny && T > 64) || (mma_path && !mma_ok))
    path = T <= kGemvMaxT ? GemmPath::Gemv : GemmPath::Legacy;
  switch (path) {
    case GemmPath::Gemv: launch_gemv_any(X, T, K, W, N, bias, Y, accumulate, s); break;
    case GemmPath::Skinny: mma::launch_skinny(X, T, K, W, N, bias, Y, accumulate, splits, false, s); break;
    case GemmPath::SkinnyAsync: mma::launch_skinny(X, T, K, W, N, bias, Y, accumulate, splits, true, s); break;
    case GemmPath::Stream: mma::launch_stream(X, T, K, W, N, bias, Y, accumulate, splits, s); break;
    case GemmPath::Skinny2: mma::launch_skinny2(X, T, K, W, N, bias, Y, accumulate, splits, s); break;
    case GemmPath::Tiled: mma::launch_tiled<128>(X, T, K, W, N, bias, Y, accumulate, splits, s); break;
    case GemmPath::TiledWide: mma::launch_tiled<256>(X, T, K, W, N, bias, Y, accumulate, splits, s); break;
    case GemmPath::Wgmma: mma::launch_wgmma(X, T, K, W, N, bias, Y, accumulate, splits, s); break;
    default: launch_legacy(X, T, K, W, N, bias, Y, accumulate, s); break;
  }
  DC_LAUNCHED();
}

// opt-in (session 24: with sincosf in the epilogue 0.81-0.90x the two launches in qkv-gemm-check, 454 vs 336 us per
// 8,192-token chunk in the model): 1 on, 128 / 256 on with that tile width (the harness); unset or 0 off
bool gemm_qkv_post_enabled() {
  const char* env = std::getenv("DISPATCH_CUDA_QKV_GEMM");
  return env && env[0] != '0' && env[0] != '\0';
}

bool gemm_qkv_post(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                   const QkvPostArgs& p, cudaStream_t s) {
  if (T <= 64 || !gemm_qkv_post_enabled()) return false;  // decode steps: no environment lookup
  const int bn = std::atoi(std::getenv("DISPATCH_CUDA_QKV_GEMM"));
  const bool mma_ok = K % 8 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(Y) % 8 == 0;
  if (!mma_ok || gemm_legacy() || !gemm_wgmma_mode()) return false;
  if (p.D != mma::kQkvHeadDim || (p.qk_norm != 0 && p.qk_norm != 1) || p.T != T || Y != p.qkv ||
      N != (p.Hq + 2 * p.Hkv) * p.D)
    return false;
  mma::launch_wgmma_qkv(X, T, K, W, N, bias, Y, p, bn, s);
  DC_LAUNCHED();
  return true;
}

void gemm(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y, bool accumulate,
          cudaStream_t s) {
  gemm_path(GemmPath::Auto, 0, X, T, K, W, N, bias, Y, accumulate, s);
}

}  // namespace dcuda
