// Elementwise, normalization, rotary, KV-write, router-logit and combine kernels (see ops.h).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include "check.h"
#include "fused_ops.h"
#include "linear_f32_tc.cuh"
#include "ops.h"
#include "pdl.h"

namespace dcuda {
namespace {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

int blocks_for(size_t n, int threads) { return int((n + threads - 1) / threads); }

__global__ void embedding_kernel(const bf16* __restrict__ table, const int32_t* __restrict__ ids, int H,
                                 float* __restrict__ x) {
  const int t = blockIdx.x;
  const bf16* row = table + size_t(ids[t]) * H;
  for (int h = threadIdx.x; h < H; h += blockDim.x) x[size_t(t) * H + h] = __bfloat162float(row[h]);
}

// One block per (token, group); fp32 sum of squares as the reference computes it.
__global__ void rms_norm_kernel(const float* x, int ld_x, int C, int G, const float* __restrict__ w,
                                float eps, float* out, int ld_out, bf16* __restrict__ out_bf16) {
  pdl_trigger();
  pdl_wait();
  const int groups = C / G;
  const int t = blockIdx.x / groups;
  const int g = blockIdx.x % groups;
  const float* src = x + size_t(t) * ld_x + size_t(g) * G;
  float ss = 0.f;
  for (int i = threadIdx.x; i < G; i += blockDim.x) ss += src[i] * src[i];
  __shared__ float partial[32];
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.f;
    v = warp_sum(v);
    if (threadIdx.x == 0) partial[0] = v;
  }
  __syncthreads();
  const float inv = 1.f / sqrtf(partial[0] / float(G) + eps);
  for (int i = threadIdx.x; i < G; i += blockDim.x) {
    const float y = w[i] * (src[i] * inv);
    if (out_bf16) out_bf16[size_t(t) * C + size_t(g) * G + i] = __float2bfloat16(y);
    if (out) out[size_t(t) * ld_out + size_t(g) * G + i] = y;
  }
}

__global__ void clamp_kernel(float* x, int ld, int C, float limit) {
  const int t = blockIdx.x;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float* p = x + size_t(t) * ld + c;
    *p = fminf(limit, fmaxf(-limit, *p));
  }
}

__global__ void rope_kernel(float* x, int ld, int heads, int D, const int32_t* __restrict__ pos,
                            const float* __restrict__ inv_freq) {
  const int t = blockIdx.x;
  const int half = D / 2;
  const float p = float(pos[t]);
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half;
    const int i = idx % half;
    const float angle = p * inv_freq[i];  // fp32 angle, as the reference computes it
    float s, c;
    sincosf(angle, &s, &c);
    float* row = x + size_t(t) * ld + size_t(h) * D;
    const float a = row[i];
    const float b = row[i + half];
    row[i] = a * c - b * s;
    row[i + half] = b * c + a * s;
  }
}

__global__ void write_kv_kernel(const float* __restrict__ k, const float* __restrict__ v, int ld, int W,
                                const int32_t* __restrict__ slots, bf16* __restrict__ kc, bf16* __restrict__ vc) {
  const int t = blockIdx.x;
  const int slot = slots[t];
  if (slot < 0) return;
  for (int c = threadIdx.x; c < W; c += blockDim.x) {
    kc[size_t(slot) * W + c] = __float2bfloat16(k[size_t(t) * ld + c]);
    vc[size_t(slot) * W + c] = __float2bfloat16(v[size_t(t) * ld + c]);
  }
}

// Warp per (token, output); fp32 throughout.
__global__ void linear_f32_kernel(const float* __restrict__ X, int K, const float* __restrict__ W, int N,
                                  float* __restrict__ Y) {
  const int t = blockIdx.x;
  const int n = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  float s = 0.f;
  for (int i = lane; i < K; i += 32) s += X[size_t(t) * K + i] * W[size_t(n) * K + i];
  s = warp_sum(s);
  if (lane == 0) Y[size_t(t) * N + n] = s;
}

// CTA per (output row, TT tokens): 128 threads stream W's row once with 16-byte loads (K % 4 == 0
// and aligned, else 4-byte) and dot it with TT token rows; a grid of N CTAs covers the GPU even
// at T = 1 (the router: E rows of H fp32).
template <int TT, bool kVec>
__global__ void __launch_bounds__(128) linear_f32_row_kernel(const float* __restrict__ X, int T, int K,
                                                              const float* __restrict__ W, int N,
                                                              float* __restrict__ Y) {
  __shared__ float part[TT][4];
  pdl_trigger();
  pdl_wait();
  const int n = blockIdx.x, t0 = blockIdx.y * TT;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.f;
  const float* w = W + size_t(n) * K;
  if (kVec) {
    const int kv = K / 4;
#pragma unroll 4
    for (int c = threadIdx.x; c < kv; c += 128) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(w) + c);
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t0 + t >= T) break;
        const float4 b = __ldg(reinterpret_cast<const float4*>(X + size_t(t0 + t) * K) + c);
        acc[t] += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      }
    }
  } else {
    for (int c = threadIdx.x; c < K; c += 128) {
      const float a = w[c];
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t0 + t >= T) break;
        acc[t] += a * X[size_t(t0 + t) * K + c];
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0) part[t][warp] = v;
  }
  __syncthreads();
  if (threadIdx.x < TT && t0 + int(threadIdx.x) < T) {
    const int t = threadIdx.x;
    Y[size_t(t0 + t) * N + n] = (part[t][0] + part[t][1]) + (part[t][2] + part[t][3]);
  }
}

template <int TT>
void launch_linear_rows(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t s) {
  const dim3 grid(N, (T + TT - 1) / TT);
  const bool vec = K % 4 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0;
  if (vec) launch_k(linear_f32_row_kernel<TT, true>, grid, dim3(128), 0, s, X, T, K, W, N, Y);
  else launch_k(linear_f32_row_kernel<TT, false>, grid, dim3(128), 0, s, X, T, K, W, N, Y);
}

// Tiled fp32 GEMM for many tokens (router logits of a prefill step): CTA tile BM tokens x BN
// outputs, 256 threads in a 16x16 grid each holding (BM/16) x (BN/16) fp32 accumulators, K in
// slices of 16 through shared memory (k-major, so a thread reads its rows and columns as float4),
// the next slice loaded into registers while the current one is multiplied. Every output is one
// thread's sequential fp32 sum over k (no split-K: deterministic). Needs K % 4 == 0 and 16-byte
// aligned X and W; rows past T and outputs past N are zero-filled and not stored.
constexpr int kTileK = 16;

template <int BM, int BN>
__global__ void __launch_bounds__(256) linear_f32_tiled_kernel(const float* __restrict__ X, int T, int K,
                                                                const float* __restrict__ W, int N,
                                                                float* __restrict__ Y) {
  constexpr int TM = BM / 16, TN = BN / 16;
  constexpr int XL = BM * kTileK / 4 / 256, WL = BN * kTileK / 4 / 256;  // float4 loads per thread
  __shared__ __align__(16) float sX[2][kTileK][BM + 4];
  __shared__ __align__(16) float sW[2][kTileK][BN + 4];
  pdl_trigger();
  pdl_wait();
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  float4 rx[XL], rw[WL];
  auto load = [&](int k0) {
#pragma unroll
    for (int i = 0; i < XL; ++i) {
      const int e = threadIdx.x + i * 256, r = e >> 2, k = k0 + (e & 3) * 4;
      rx[i] = m0 + r < T && k < K ? __ldg(reinterpret_cast<const float4*>(X + size_t(m0 + r) * K + k))
                                  : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < WL; ++i) {
      const int e = threadIdx.x + i * 256, r = e >> 2, k = k0 + (e & 3) * 4;
      rw[i] = n0 + r < N && k < K ? __ldg(reinterpret_cast<const float4*>(W + size_t(n0 + r) * K + k))
                                  : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < XL; ++i) {
      const int e = threadIdx.x + i * 256, r = e >> 2, k = (e & 3) * 4;
      sX[buf][k][r] = rx[i].x, sX[buf][k + 1][r] = rx[i].y, sX[buf][k + 2][r] = rx[i].z, sX[buf][k + 3][r] = rx[i].w;
    }
#pragma unroll
    for (int i = 0; i < WL; ++i) {
      const int e = threadIdx.x + i * 256, r = e >> 2, k = (e & 3) * 4;
      sW[buf][k][r] = rw[i].x, sW[buf][k + 1][r] = rw[i].y, sW[buf][k + 2][r] = rw[i].z, sW[buf][k + 3][r] = rw[i].w;
    }
  };
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  load(0);
  store(0);
  __syncthreads();
  const int slices = (K + kTileK - 1) / kTileK;
  for (int sl = 0; sl < slices; ++sl) {
    const int buf = sl & 1;
    if (sl + 1 < slices) load((sl + 1) * kTileK);
#pragma unroll
    for (int k = 0; k < kTileK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) *reinterpret_cast<float4*>(a + i) = *reinterpret_cast<const float4*>(&sX[buf][k][ty * TM + i]);
#pragma unroll
      for (int j = 0; j < TN; j += 4) *reinterpret_cast<float4*>(b + j) = *reinterpret_cast<const float4*>(&sW[buf][k][tx * TN + j]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (sl + 1 < slices) store(buf ^ 1);  // the other buffer: last read before the previous barrier
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + ty * TM + i;
    if (m >= T) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = n0 + tx * TN + j;
      if (n < N) Y[size_t(m) * N + n] = acc[i][j];
    }
  }
}

void launch_linear_tiled(const float* X, int T, int K, const float* W, int N, float* Y, int bm, cudaStream_t s) {
  if (bm == 128)
    launch_k(linear_f32_tiled_kernel<128, 64>, dim3((T + 127) / 128, (N + 63) / 64), dim3(256), 0, s, X, T, K, W, N, Y);
  else
    launch_k(linear_f32_tiled_kernel<64, 64>, dim3((T + 63) / 64, (N + 63) / 64), dim3(256), 0, s, X, T, K, W, N, Y);
}

bool linear_tiled_fits(const float* X, int K, const float* W, int N) {
  return K % 4 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0 && N >= 32 &&
         (N + 63) / 64 <= 65535;
}

// The tiled kernel when its grid fills at least half the GPU (fewer tiles: the row kernel, which
// spreads over N x T/8 CTAs), K % 4 == 0, X and W 16-byte aligned and N >= 32; 128-token tiles
// when they alone make ~a wave of 132 SMs, else 64.
bool linear_auto_tiled(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t s) {
  if (!linear_tiled_fits(X, K, W, N)) return false;
  const long tiles128 = long((T + 127) / 128) * ((N + 63) / 64), tiles64 = long((T + 63) / 64) * ((N + 63) / 64);
  if (tiles64 < 64) return false;
  launch_linear_tiled(X, T, K, W, N, Y, tiles128 >= 120 ? 128 : 64, s);
  return true;
}

__device__ __forceinline__ float silu(float g) { return g / (1.f + expf(-g)); }

__global__ void silu_mul_f32_kernel(const float* __restrict__ gu, int I, bf16* __restrict__ act) {
  pdl_trigger();
  pdl_wait();
  const int r = blockIdx.x;
  for (int i = threadIdx.x; i < I; i += blockDim.x)
    act[size_t(r) * I + i] = __float2bfloat16(silu(gu[size_t(r) * 2 * I + i]) * gu[size_t(r) * 2 * I + I + i]);
}

__global__ void silu_mul_bf16_kernel(const bf16* __restrict__ gu, int I, bf16* __restrict__ act) {
  pdl_trigger();
  pdl_wait();
  const int r = blockIdx.x;
  for (int i = threadIdx.x; i < I; i += blockDim.x) {
    const float g = __bfloat162float(gu[size_t(r) * 2 * I + i]);
    const float u = __bfloat162float(gu[size_t(r) * 2 * I + I + i]);
    act[size_t(r) * I + i] = __float2bfloat16(silu(g) * u);
  }
}

// Block per routed row, warp per output feature; the row's expert by binary search in offsets.
__global__ void grouped_gemm_ref_kernel(const bf16* __restrict__ X, const bf16* __restrict__ W, bf16* __restrict__ Y,
                                        const int32_t* __restrict__ offsets, int E, int N, int K) {
  const int r = blockIdx.x;
  if (r >= offsets[E]) return;  // rows past the routed ones
  int lo = 0, hi = E - 1;       // the last e with offsets[e] <= r
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  const bf16* w = W + size_t(lo) * N * K;
  const int lane = threadIdx.x & 31;
  for (int n = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5); n < N; n += gridDim.y * (blockDim.x >> 5)) {
    float s = 0.f;
    for (int i = lane; i < K; i += 32) s += __bfloat162float(X[size_t(r) * K + i]) * __bfloat162float(w[size_t(n) * K + i]);
    s = warp_sum(s);
    if (lane == 0) Y[size_t(r) * N + n] = __float2bfloat16(s);
  }
}

__global__ void dequant_int8_kernel(const int8_t* __restrict__ q, const float* __restrict__ scale, size_t n, int K,
                                    bf16* __restrict__ w) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    w[i] = __float2bfloat16(float(q[i]) * scale[i / K]);
}

__global__ void add_moe_kernel(float* __restrict__ x, const bf16* __restrict__ routed, const float* __restrict__ shared,
                               const float* __restrict__ gate, int H) {
  const int t = blockIdx.x;
  const float g = gate ? 1.f / (1.f + expf(-gate[t])) : 1.f;
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    float v = __bfloat162float(routed[size_t(t) * H + h]);
    if (shared) v += g * shared[size_t(t) * H + h];
    x[size_t(t) * H + h] += v;
  }
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows, int H,
                                   float* __restrict__ out) {
  const int i = blockIdx.x;
  for (int h = threadIdx.x; h < H; h += blockDim.x) out[size_t(i) * H + h] = x[size_t(rows[i]) * H + h];
}

int threads_for(int n) { return n >= 256 ? 256 : n >= 128 ? 128 : n > 32 ? 64 : 32; }

}  // namespace

void embedding(const bf16* table, const int32_t* ids, int T, int H, float* x, cudaStream_t s) {
  if (T == 0) return;
  embedding_kernel<<<T, threads_for(H), 0, s>>>(table, ids, H, x);
  DC_LAUNCHED();
}

void rms_norm(const float* x, int ld_x, int T, int C, int G, const float* w, float eps, float* out, int ld_out,
              bf16* out_bf16, cudaStream_t s) {
  DC_CHECK(G > 0 && C % G == 0, "columns must be a multiple of the group size");
  if (T == 0) return;
  launch_k(rms_norm_kernel, dim3(T * (C / G)), dim3(threads_for(G)), 0, s, x, ld_x, C, G, w, eps, out, ld_out,
           out_bf16);
  DC_LAUNCHED();
}

void clamp(float* x, int ld, int T, int C, float limit, cudaStream_t s) {
  if (T == 0) return;
  clamp_kernel<<<T, threads_for(C), 0, s>>>(x, ld, C, limit);
  DC_LAUNCHED();
}

void rope(float* x, int ld, int T, int heads, int D, const int32_t* pos, const float* inv_freq, cudaStream_t s) {
  DC_CHECK(D % 2 == 0, "head dim must be even");
  if (T == 0) return;
  rope_kernel<<<T, threads_for(heads * D / 2), 0, s>>>(x, ld, heads, D, pos, inv_freq);
  DC_LAUNCHED();
}

void write_kv(const float* k, const float* v, int ld, int T, int W, const int32_t* slots, bf16* kc, bf16* vc,
              cudaStream_t s) {
  if (T == 0) return;
  write_kv_kernel<<<T, threads_for(W), 0, s>>>(k, v, ld, W, slots, kc, vc);
  DC_LAUNCHED();
}

// DISPATCH_CUDA_ROUTER_TC (read once): unset, the 3xTF32 tensor-core kernel where it won on the
// H200 (router-check, 23:33 UTC): T >= 128 with N >= 64 (512 tokens x 128 experts 24.3 vs 41.8 us,
// 8192 x 64 141.9 vs 231.1), or T >= 2048 (8192 x 8: 59.0 vs 74.0); at T = 64 it lost (9.7 vs 8.4
// us at 128 experts). 1: every T > 16 with N >= 8; 0: never.
int linear_f32_tc_mode() {
  static const int mode = [] {
    const char* v = std::getenv("DISPATCH_CUDA_ROUTER_TC");
    if (legacy_kernels() || (v && v[0] == '0')) return 0;
    return v && v[0] == '1' ? 2 : 1;
  }();
  return mode;
}

bool linear_f32_tc_enabled() { return linear_f32_tc_mode() == 2; }

bool linear_f32_tc_fits(const float* X, int K, const float* W) {
  return K > 0 && K % 4 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0;
}

// K splits of the prefill-size router logits (T >= 2048, N > 64; 64 x 128 tiles of 83 KB, two CTAs fit an SM): the
// launcher's one wave of CTAs, but at least 2 splits while the tiles alone fill no more than one CTA per SM. At 8,192
// tokens x 128 experts (128 tiles; the launcher's rule gave 1 split) 2 splits took the kernel from 147 to 126 us on
// the H200, 4 (two waves) to 166 (session 23, prefill timelines; docs/cuda-backend.md). Fewer tokens keep the
// launcher's count (2 at 4,096, 4 at 2,048: not re-measured). DISPATCH_CUDA_ROUTER_SPLITS=1-8 forces the count (read
// per launch, for A/B runs).
static int router_prefill_splits(int T, int N) {
  const char* v = std::getenv("DISPATCH_CUDA_ROUTER_SPLITS");
  if (v && v[0] >= '1' && v[0] <= '8' && v[1] == '\0') return v[0] - '0';
  const long sms = tc32::sm_count_once(), tiles = long((T + 63) / 64) * ((N + 127) / 128);
  const long wave = std::max<long>(1, std::min<long>(8, sms / tiles));  // launch_3xtf32's own rule
  return int(tiles <= sms ? std::max<long>(wave, 2) : wave);
}

// Tile shapes by (T, N): decode-size T splits K over a cluster so ~a wave of CTAs streams W
// (T = 64, N = 128: 2 x 8 tiles x 8 splits); prefill-size T takes whole-K 64 x 128 (or 64 x 64)
// tiles, one wave at T = 8192. N <= 8 (Mixtral) takes 8-expert tiles.
void linear_f32_tc(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t s) {
  DC_CHECK(linear_f32_tc_fits(X, K, W), "linear_f32_tc: needs K % 4 == 0 and 16-byte aligned X and W");
  DC_CHECK(N > 0, "linear_f32_tc: N must be positive");
  if (T == 0) return;
  if (N <= 8) {
    if (T >= 2048) tc32::launch_3xtf32<64, 8, 4, 1, 4>(X, T, K, W, N, Y, 0, s);
    else tc32::launch_3xtf32<32, 8, 2, 1, 8>(X, T, K, W, N, Y, 0, s);
  } else if (T >= 2048 && N > 64) {
    tc32::launch_3xtf32<64, 128, 2, 4, 3>(X, T, K, W, N, Y, router_prefill_splits(T, N), s);
  } else if (T >= 128) {
    tc32::launch_3xtf32<64, 64, 2, 2, 4>(X, T, K, W, N, Y, 0, s);
  } else {
    tc32::launch_3xtf32<32, 16, 2, 2, 8>(X, T, K, W, N, Y, 0, s);
  }
  DC_LAUNCHED();
}

void linear_f32(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t s) {
  if (T == 0) return;
  const int tc = linear_f32_tc_mode();
  const bool tc_wins = T >= 128 && (N >= 64 || T >= 2048);
  if (T > 16 && N >= 8 && (tc == 2 || (tc == 1 && tc_wins)) && linear_f32_tc_fits(X, K, W)) {  // N = 1 gates: as before
    linear_f32_tc(X, T, K, W, N, Y, s);
    return;
  }
  if (legacy_kernels()) {
    dim3 grid(T, blocks_for(N, 8));
    linear_f32_kernel<<<grid, 256, 0, s>>>(X, K, W, N, Y);
  } else if (T == 1) {
    launch_linear_rows<1>(X, T, K, W, N, Y, s);
  } else if (T == 2) {
    launch_linear_rows<2>(X, T, K, W, N, Y, s);
  } else if (T <= 4) {
    launch_linear_rows<4>(X, T, K, W, N, Y, s);
  } else if (!linear_auto_tiled(X, T, K, W, N, Y, s)) {
    DC_CHECK((T + 7) / 8 <= 65535, "linear_f32: too many tokens for one launch");
    launch_linear_rows<8>(X, T, K, W, N, Y, s);
  }
  DC_LAUNCHED();
}

void linear_f32_rows(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t s) {
  if (T == 0) return;
  DC_CHECK((T + 7) / 8 <= 65535, "linear_f32: too many tokens for one launch");
  launch_linear_rows<8>(X, T, K, W, N, Y, s);
  DC_LAUNCHED();
}

void linear_f32_tiled(const float* X, int T, int K, const float* W, int N, float* Y, int tile_rows, cudaStream_t s) {
  DC_CHECK(tile_rows == 64 || tile_rows == 128, "linear_f32_tiled: tile_rows must be 64 or 128");
  DC_CHECK(linear_tiled_fits(X, K, W, N), "linear_f32_tiled: needs K % 4 == 0, 16-byte aligned X and W, N >= 32");
  if (T == 0) return;
  launch_linear_tiled(X, T, K, W, N, Y, tile_rows, s);
  DC_LAUNCHED();
}

void silu_mul_f32(const float* gu, int rows, int I, bf16* act, cudaStream_t s) {
  if (rows == 0) return;
  launch_k(silu_mul_f32_kernel, dim3(rows), dim3(threads_for(I)), 0, s, gu, I, act);
  DC_LAUNCHED();
}

void silu_mul_bf16(const bf16* gu, int rows, int I, bf16* act, cudaStream_t s) {
  if (rows == 0) return;
  launch_k(silu_mul_bf16_kernel, dim3(rows), dim3(threads_for(I)), 0, s, gu, I, act);
  DC_LAUNCHED();
}

void grouped_gemm_ref(const bf16* X, const bf16* W, bf16* Y, const int32_t* offsets, int M, int E, int N, int K,
                      cudaStream_t s) {
  if (M == 0) return;
  dim3 grid(M, blocks_for(N, 8) < 64 ? blocks_for(N, 8) : 64);
  grouped_gemm_ref_kernel<<<grid, 256, 0, s>>>(X, W, Y, offsets, E, N, K);
  DC_LAUNCHED();
}

void dequant_int8(const int8_t* q, const float* scale, size_t rows, int K, bf16* w, cudaStream_t s) {
  if (rows == 0) return;
  dequant_int8_kernel<<<2048, 256, 0, s>>>(q, scale, rows * K, K, w);
  DC_LAUNCHED();
}

void add_moe(float* x, const bf16* routed, const float* shared, const float* gate, int T, int H, cudaStream_t s) {
  if (T == 0) return;
  add_moe_kernel<<<T, threads_for(H), 0, s>>>(x, routed, shared, gate, H);
  DC_LAUNCHED();
}

void gather_rows(const float* x, const int32_t* rows, int R, int H, float* out, cudaStream_t s) {
  if (R == 0) return;
  gather_rows_kernel<<<R, threads_for(H), 0, s>>>(x, rows, H, out);
  DC_LAUNCHED();
}

void f32_to_bf16_host(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      dst[i] = uint16_t((u >> 16) | 0x40);  // NaN stays NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      dst[i] = uint16_t(u >> 16);
    }
  }
}

}  // namespace dcuda
