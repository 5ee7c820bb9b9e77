// q/k norm + clip + RoPE + KV write, post-attention norm + router logits, and MoE combine +
// residual + next RMSNorm (see fused_ops.h). Each computes the formulas of the kernels it replaces
// (same fp32 expressions, same bf16 rounding points) except for the order of fp32 sums, and
// norm_router's logit, inv_rms * sum(W * norm_w * x) where the separate kernels compute
// sum(W * (norm_w * (x * inv_rms))): equal up to fp32 rounding.
#include <cstdlib>
#include "check.h"
#include "fused_ops.h"
#include "pdl.h"

namespace dcuda {
namespace {

constexpr int kPostThreads = 64;    // modes 0 and 1: a warp per (token, head), 2 warps per CTA
constexpr int kWholeThreads = 512;  // mode 2: a CTA per token (the norm spans all of q or all of k)
constexpr int kPostMaxDim = 256;
constexpr int kPostPairs = kPostMaxDim / 64;  // rotate-half pairs (i, i + D/2) per lane

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum of v over the CTA (blockDim.x a multiple of 32, <= 1024); every thread gets the total.
__device__ __forceinline__ float block_sum(float v, float* part /* [32] shared */) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  v = warp_sum(v);
  __syncthreads();  // part may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  float s = lane < int(blockDim.x >> 5) ? part[lane] : 0.f;
  return warp_sum(s);
}

// kWhole = false (qk_norm 0 or 1): warp w of the grid takes head w % (Hq + 2 Hkv) of token
// w / (Hq + 2 Hkv), so a decode token's heads spread over many SMs and no warp waits on another.
// kWhole = true (qk_norm 2): one CTA per token sums the squares of its whole q and k projections
// first (a barrier: q is rotated in place, so every read of q precedes every write), then its
// warps take the heads in turn. Lane l holds the pairs (i, i + D/2), i = l + 32 j: the rotate-half
// partners, loaded straight from global memory (coalesced), no shared-memory staging. pos, slots,
// inv_freq and the norm weights are read before pdl_wait (nothing in the step writes them), so
// the sines and cosines are ready when the row arrives.
template <bool kWhole>
__global__ void __launch_bounds__(kWhole ? kWholeThreads : kPostThreads) qkv_post_kernel(QkvPostArgs a) {
  __shared__ float part[2][32];
  pdl_trigger();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int D = a.D, half = D / 2, heads = a.Hq + a.Hkv, all = heads + a.Hkv;
  const int QD = a.Hq * D, QK = heads * D, W = a.Hkv * D, ld = QK + W;
  int t, h;
  if (kWhole) {
    t = blockIdx.x, h = warp;
  } else {
    const int gw = blockIdx.x * nw + warp;
    t = gw / all, h = gw % all;
    if (t >= a.T) return;  // the last CTA's spare warp
  }
  const float p = float(a.pos[t]);
  const int slot = a.slots[t];
  float cs[kPostPairs], sn[kPostPairs], w0[kPostPairs], w1[kPostPairs];
#pragma unroll
  for (int j = 0; j < kPostPairs; ++j) {
    const int i = lane + 32 * j;
    cs[j] = 1.f, sn[j] = 0.f, w0[j] = 1.f, w1[j] = 1.f;
    if (i < half) {
      const float angle = p * a.inv_freq[i];
      sincosf(angle, &sn[j], &cs[j]);
      if (!kWhole && a.qk_norm == 1 && h < heads) {
        const float* nwt = h < a.Hq ? a.q_norm : a.k_norm;
        w0[j] = nwt[i], w1[j] = nwt[i + half];
      }
    }
  }
  pdl_wait();
  float* row = a.qkv + size_t(t) * ld;
  float inv_q = 1.f, inv_k = 1.f;
  if (kWhole) {
    float sq = 0.f, sk = 0.f;
    for (int c = threadIdx.x; c < QK; c += blockDim.x) {
      const float v = row[c];
      if (c < QD) sq += v * v;
      else sk += v * v;
    }
    sq = warp_sum(sq), sk = warp_sum(sk);
    if (lane == 0) part[0][warp] = sq, part[1][warp] = sk;
    __syncthreads();  // also: every read of q above precedes the writes below
    sq = warp_sum(lane < nw ? part[0][lane] : 0.f);
    sk = warp_sum(lane < nw ? part[1][lane] : 0.f);
    inv_q = 1.f / sqrtf(sq / float(QD) + a.eps);
    inv_k = 1.f / sqrtf(sk / float(W) + a.eps);
  }
  const float clip = a.clip;
  for (; h < all; h += kWhole ? nw : all) {
    float* x = row + size_t(h) * D;
    if (h >= heads) {  // v: clip, then to the cache as bf16
      if (slot < 0) continue;
      bf16* vc = a.v_cache + size_t(slot) * W + size_t(h - heads) * D;
      float vv[2 * kPostPairs];  // all loads before the first store (the store could alias x)
#pragma unroll
      for (int j = 0; j < 2 * kPostPairs; ++j) vv[j] = lane + 32 * j < D ? x[lane + 32 * j] : 0.f;
#pragma unroll
      for (int j = 0; j < 2 * kPostPairs; ++j) {
        if (lane + 32 * j >= D) continue;
        float v = vv[j];
        if (clip > 0.f) v = fminf(clip, fmaxf(-clip, v));
        vc[lane + 32 * j] = __float2bfloat16(v);
      }
      continue;
    }
    const bool is_q = h < a.Hq;
    float x0[kPostPairs], x1[kPostPairs];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kPostPairs; ++j) {
      const int i = lane + 32 * j;
      x0[j] = 0.f, x1[j] = 0.f;
      if (i < half) x0[j] = x[i], x1[j] = x[i + half];
      ss += x0[j] * x0[j] + x1[j] * x1[j];
    }
    float f = 1.f;
    if (kWhole) f = is_q ? inv_q : inv_k;
    else if (a.qk_norm == 1) f = 1.f / sqrtf(warp_sum(ss) / float(D) + a.eps);
    const float* nwh = kWhole ? (is_q ? a.q_norm + size_t(h) * D : a.k_norm + size_t(h - a.Hq) * D) : nullptr;
    bf16* kc = !is_q && slot >= 0 ? a.k_cache + size_t(slot) * W + size_t(h - a.Hq) * D : nullptr;
#pragma unroll
    for (int j = 0; j < kPostPairs; ++j) {
      const int i = lane + 32 * j;
      if (i >= half) continue;
      float v0 = x0[j], v1 = x1[j];
      if (kWhole) {
        v0 = nwh[i] * (v0 * f), v1 = nwh[i + half] * (v1 * f);
      } else if (a.qk_norm == 1) {
        v0 = w0[j] * (v0 * f), v1 = w1[j] * (v1 * f);
      }
      if (clip > 0.f) v0 = fminf(clip, fmaxf(-clip, v0)), v1 = fminf(clip, fmaxf(-clip, v1));
      const float r0 = v0 * cs[j] - v1 * sn[j];
      const float r1 = v1 * cs[j] + v0 * sn[j];
      if (is_q) {
        x[i] = r0, x[i + half] = r1;
      } else if (kc) {
        kc[i] = __float2bfloat16(r0), kc[i + half] = __float2bfloat16(r1);
      }
    }
  }
}

// Prefill sizes (qkv_post_items): qkv_post_kernel<false>'s work with warp w taking the kItems (token, head) items
// kItems w .. kItems w + kItems - 1 in token-major order (head h of token t is item t (Hq + 2 Hkv) + h); kItems divides
// Hq + 2 Hkv, so they are heads of one token. A warp issues the loads of all its items before it computes any: each
// warp keeps kItems times the bytes in flight, and the grid has kItems times fewer CTAs (at 8,192 tokens x 40 heads,
// a CTA per two heads left the kernel at ~30% of HBM: each warp waited a round trip for 512 bytes). Per item the
// same fp32 expressions as qkv_post_kernel<false> (kept as its own kernel so that decode steps keep its code and bits).
// kPairs: rotate-half pairs per lane, 2 for D <= 128 (the pairs past D / 2 hold zeros and add +0 to the sums, so 4
// and 2 give the same bits): half the registers of 4, so twice the warps fit an SM (session 24).
template <int kItems, int kPairs>
__global__ void __launch_bounds__(kPostThreads) qkv_post_items_kernel(QkvPostArgs a) {
  pdl_trigger();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int D = a.D, half = D / 2, heads = a.Hq + a.Hkv, all = heads + a.Hkv;
  const int QK = heads * D, W = a.Hkv * D, ld = QK + W;
  const int item = (blockIdx.x * nw + warp) * kItems, t = item / all, h0 = item % all;
  if (t >= a.T) return;  // the last CTA's spare warp
  const float p = float(a.pos[t]);
  const int slot = a.slots[t];
  // the position's sines and cosines; the per-head norm weights (qk_norm 1) of q (w0, w1) and k (wk0, wk1)
  float cs[kPairs], sn[kPairs], w0[kPairs], w1[kPairs], wk0[kPairs], wk1[kPairs];
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    const int i = lane + 32 * j;
    cs[j] = 1.f, sn[j] = 0.f, w0[j] = 1.f, w1[j] = 1.f, wk0[j] = 1.f, wk1[j] = 1.f;
    if (i < half) {
      const float angle = p * a.inv_freq[i];
      sincosf(angle, &sn[j], &cs[j]);
      if (a.qk_norm == 1) {
        w0[j] = a.q_norm[i], w1[j] = a.q_norm[i + half];
        wk0[j] = a.k_norm[i], wk1[j] = a.k_norm[i + half];
      }
    }
  }
  pdl_wait();
  const float* row = a.qkv + size_t(t) * ld;
  // every item's loads before any store: q / k heads xs[j] = x[i], xs[kPairs + j] = x[i + half] (i = lane + 32 j
  // < half); v heads xs[j] = x[lane + 32 j]
  float xs[kItems][2 * kPairs];
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const int h = h0 + it;
    const float* x = row + size_t(h) * D;
    if (h >= heads) {
#pragma unroll
      for (int j = 0; j < 2 * kPairs; ++j) xs[it][j] = lane + 32 * j < D ? x[lane + 32 * j] : 0.f;
    } else {
#pragma unroll
      for (int j = 0; j < kPairs; ++j) {
        const int i = lane + 32 * j;
        xs[it][j] = i < half ? x[i] : 0.f;
        xs[it][kPairs + j] = i < half ? x[i + half] : 0.f;
      }
    }
  }
  const float clip = a.clip;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const int h = h0 + it;
    if (h >= heads) {  // v: clip, then to the cache as bf16
      if (slot < 0) continue;
      bf16* vc = a.v_cache + size_t(slot) * W + size_t(h - heads) * D;
#pragma unroll
      for (int j = 0; j < 2 * kPairs; ++j) {
        if (lane + 32 * j >= D) continue;
        float v = xs[it][j];
        if (clip > 0.f) v = fminf(clip, fmaxf(-clip, v));
        vc[lane + 32 * j] = __float2bfloat16(v);
      }
      continue;
    }
    const bool is_q = h < a.Hq;
    float* x = a.qkv + size_t(t) * ld + size_t(h) * D;
    float x0[kPairs], x1[kPairs];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      x0[j] = xs[it][j], x1[j] = xs[it][kPairs + j];
      ss += x0[j] * x0[j] + x1[j] * x1[j];
    }
    float f = 1.f;
    if (a.qk_norm == 1) f = 1.f / sqrtf(warp_sum(ss) / float(D) + a.eps);
    bf16* kc = !is_q && slot >= 0 ? a.k_cache + size_t(slot) * W + size_t(h - a.Hq) * D : nullptr;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const int i = lane + 32 * j;
      if (i >= half) continue;
      float v0 = x0[j], v1 = x1[j];
      if (a.qk_norm == 1) {
        v0 = (is_q ? w0[j] : wk0[j]) * (v0 * f), v1 = (is_q ? w1[j] : wk1[j]) * (v1 * f);
      }
      if (clip > 0.f) v0 = fminf(clip, fmaxf(-clip, v0)), v1 = fminf(clip, fmaxf(-clip, v1));
      const float r0 = v0 * cs[j] - v1 * sn[j];
      const float r1 = v1 * cs[j] + v0 * sn[j];
      if (is_q) {
        x[i] = r0, x[i + half] = r1;
      } else if (kc) {
        kc[i] = __float2bfloat16(r0), kc[i + half] = __float2bfloat16(r1);
      }
    }
  }
}

// One CTA per token, 8 columns per thread and pass (H % 8 == 0). The k (row, weight) pairs are loaded kCombineChunk
// at a time before the Y loads they address, so a pass waits on 2 k / kCombineChunk round trips, not 2k; the sums run
// in j order as before, whatever the chunk. The norm's pass takes x from registers where the thread wrote it.
// norm_w's first pass is read before pdl_wait, and so are the first kCombineChunk (row, weight) pairs: the routing is
// written two or more kernels back (route_small or the self-routed gate|up GEMM), and the down GEMM between triggers
// its dependents only after its own griddepcontrol.wait, so once this kernel runs the routing's writer has completed.
template <int kCombineChunk>
__global__ void __launch_bounds__(256) moe_combine_norm_kernel(const uint4* __restrict__ Y,
                                                               const int32_t* __restrict__ slot_row,
                                                               const float* __restrict__ weights, int k, int vecs,
                                                               const float* __restrict__ shared,
                                                               const float* __restrict__ gate, float* __restrict__ x,
                                                               const float* __restrict__ norm_w, float eps,
                                                               bf16* __restrict__ out) {
  __shared__ float part[32];
  pdl_trigger();
  const int t = blockIdx.x, H = vecs * 8;
  const float4* wv = reinterpret_cast<const float4*>(norm_w);
  float4 nw0 = make_float4(0.f, 0.f, 0.f, 0.f), nw1 = nw0;
  if (norm_w && int(threadIdx.x) < vecs) nw0 = __ldg(wv + 2 * threadIdx.x), nw1 = __ldg(wv + 2 * threadIdx.x + 1);
  const int32_t* rows = slot_row + size_t(t) * k;
  const float* wts = weights + size_t(t) * k;
  int r_pre[kCombineChunk];
  float w_pre[kCombineChunk];
#pragma unroll
  for (int jj = 0; jj < kCombineChunk; ++jj) {
    r_pre[jj] = jj < k ? rows[jj] : 0;
    w_pre[jj] = jj < k ? wts[jj] : 0.f;
  }
  pdl_wait();
  const float g = gate ? 1.f / (1.f + expf(-gate[t])) : 1.f;
  float4* xr = reinterpret_cast<float4*>(x + size_t(t) * H);
  const float4* sh = shared ? reinterpret_cast<const float4*>(shared + size_t(t) * H) : nullptr;
  float ss = 0.f;
  float4 xk0 = make_float4(0.f, 0.f, 0.f, 0.f), xk1 = xk0;
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    // x and the shared expert's row in flight with the (row, weight) loads
    float4 x0 = xr[2 * v], x1 = xr[2 * v + 1];
    float4 s0 = make_float4(0.f, 0.f, 0.f, 0.f), s1 = s0;
    if (sh) s0 = sh[2 * v], s1 = sh[2 * v + 1];
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j0 = 0; j0 < k; j0 += kCombineChunk) {
      int rj[kCombineChunk];
      float wj[kCombineChunk];
#pragma unroll
      for (int jj = 0; jj < kCombineChunk; ++jj) {
        rj[jj] = j0 == 0 ? r_pre[jj] : j0 + jj < k ? rows[j0 + jj] : 0;
        wj[jj] = j0 == 0 ? w_pre[jj] : j0 + jj < k ? wts[j0 + jj] : 0.f;
      }
      uint4 y[kCombineChunk];
#pragma unroll
      for (int jj = 0; jj < kCombineChunk; ++jj) y[jj] = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int jj = 0; jj < kCombineChunk; ++jj)
        if (j0 + jj < k) y[jj] = Y[size_t(rj[jj]) * vecs + v];
#pragma unroll
      for (int jj = 0; jj < kCombineChunk; ++jj) {
        if (j0 + jj >= k) break;
        const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&y[jj]);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __bfloat1622float2(p[i]);
          acc[2 * i] += wj[jj] * f.x;
          acc[2 * i + 1] += wj[jj] * f.y;
        }
      }
    }
    float r[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = __bfloat162float(__float2bfloat16(acc[i]));  // unpermute's bf16 output
    if (sh) {
      r[0] += g * s0.x, r[1] += g * s0.y, r[2] += g * s0.z, r[3] += g * s0.w;
      r[4] += g * s1.x, r[5] += g * s1.y, r[6] += g * s1.z, r[7] += g * s1.w;
    }
    x0.x += r[0], x0.y += r[1], x0.z += r[2], x0.w += r[3];
    x1.x += r[4], x1.y += r[5], x1.z += r[6], x1.w += r[7];
    xr[2 * v] = x0, xr[2 * v + 1] = x1;
    if (v == int(threadIdx.x)) xk0 = x0, xk1 = x1;  // the norm's pass reads these from registers
    ss += x0.x * x0.x + x0.y * x0.y + x0.z * x0.z + x0.w * x0.w + x1.x * x1.x + x1.y * x1.y + x1.z * x1.z +
          x1.w * x1.w;
  }
  if (!norm_w) return;  // uniform across the CTA
  ss = block_sum(ss, part);
  const float inv = 1.f / sqrtf(ss / float(H) + eps);
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    const float4 x0 = v == int(threadIdx.x) ? xk0 : xr[2 * v], x1 = v == int(threadIdx.x) ? xk1 : xr[2 * v + 1];
    const float4 w0 = v == int(threadIdx.x) ? nw0 : wv[2 * v], w1 = v == int(threadIdx.x) ? nw1 : wv[2 * v + 1];
    uint4 o;
    __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(&o);
    q[0] = __floats2bfloat162_rn(w0.x * (x0.x * inv), w0.y * (x0.y * inv));
    q[1] = __floats2bfloat162_rn(w0.z * (x0.z * inv), w0.w * (x0.w * inv));
    q[2] = __floats2bfloat162_rn(w1.x * (x1.x * inv), w1.y * (x1.y * inv));
    q[3] = __floats2bfloat162_rn(w1.z * (x1.z * inv), w1.w * (x1.w * inv));
    reinterpret_cast<uint4*>(out + size_t(t) * H)[v] = o;
  }
}

__global__ void rope_table_kernel(const int32_t* __restrict__ pos, int T, int half,
                                  const float* __restrict__ inv_freq, float* __restrict__ out) {
  pdl_trigger();
  pdl_wait();
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= T * half) return;
  const int t = idx / half, i = idx % half;
  float sn, cs;
  sincosf(float(pos[t]) * inv_freq[i], &sn, &cs);
  out[size_t(t) * 2 * half + i] = cs;
  out[size_t(t) * 2 * half + half + i] = sn;
}

constexpr int kNormRouterPre = 4;
constexpr int kTailPre = 2;

// CTA (128 threads) per expert row: one pass over W's row, norm_w and x accumulates both the
// dot with norm_w * x and the sum of squares of x for each of the TT tokens.
template <int TT>
__global__ void __launch_bounds__(128) norm_router_kernel(const float* __restrict__ x, int T, int H,
                                                           const float* __restrict__ norm_w, float eps,
                                                           const float* __restrict__ W, int E,
                                                           float* __restrict__ logits, float* __restrict__ h,
                                                           bf16* __restrict__ hb, int cols) {
  __shared__ float part[2][TT][4];
  __shared__ float s_inv[TT];
  pdl_trigger();
  const int n = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float dot[TT], ss[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) dot[t] = 0.f, ss[t] = 0.f;
  const float4* w4 = reinterpret_cast<const float4*>(W + size_t(n) * H);
  const float4* g4 = reinterpret_cast<const float4*>(norm_w);
  const int kv = H / 4;
  // the weights of the first kNormRouterPre passes (all of them at H <= 2048) are read before
  // pdl_wait, while the previous kernel finishes; x follows the wait. Same per-thread order of sums.
  float4 wg_pre[kNormRouterPre];
#pragma unroll
  for (int u = 0; u < kNormRouterPre; ++u) {
    const int c = tid + 128 * u;
    wg_pre[u] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c < kv) {
      const float4 w = __ldg(w4 + c), g = __ldg(g4 + c);
      wg_pre[u] = make_float4(w.x * g.x, w.y * g.y, w.z * g.z, w.w * g.w);
    }
  }
  // this CTA's columns of h: the first kTailPre per thread (all of them at T * cols <= 256)
  // have norm_w read now and x loaded with the dot's x below, not after the reduction
  const int c0 = n * cols;
  float tail_w[kTailPre], tail_x[kTailPre];
  size_t tail_at[kTailPre];  // t * H + c, clamped into x (read unconditionally; stored only when in range)
#pragma unroll
  for (int u = 0; u < kTailPre; ++u) {
    const int i = min(tid + 128 * u, T * cols - 1), c = min(c0 + i % cols, H - 1);
    tail_at[u] = size_t(i / cols) * H + c;
    tail_w[u] = __ldg(norm_w + c);
  }
  pdl_wait();
#pragma unroll
  for (int u = 0; u < kTailPre; ++u) tail_x[u] = x[tail_at[u]];
  auto accumulate = [&](int c, const float4& wg) {
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t >= T) break;
      const float4 v = __ldg(reinterpret_cast<const float4*>(x + size_t(t) * H) + c);
      dot[t] += wg.x * v.x + wg.y * v.y + wg.z * v.z + wg.w * v.w;
      ss[t] += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  };
#pragma unroll
  for (int u = 0; u < kNormRouterPre; ++u)
    if (tid + 128 * u < kv) accumulate(tid + 128 * u, wg_pre[u]);
#pragma unroll 2
  for (int c = tid + 128 * kNormRouterPre; c < kv; c += 128) {
    const float4 w = __ldg(w4 + c), g = __ldg(g4 + c);
    accumulate(c, make_float4(w.x * g.x, w.y * g.y, w.z * g.z, w.w * g.w));
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    const float d = warp_sum(dot[t]), q = warp_sum(ss[t]);
    if (lane == 0) part[0][t][warp] = d, part[1][t][warp] = q;
  }
  __syncthreads();
  if (tid < TT && tid < T) {
    const float q = (part[1][tid][0] + part[1][tid][1]) + (part[1][tid][2] + part[1][tid][3]);
    const float inv = 1.f / sqrtf(q / float(H) + eps);
    s_inv[tid] = inv;
    const float d = (part[0][tid][0] + part[0][tid][1]) + (part[0][tid][2] + part[0][tid][3]);
    logits[size_t(tid) * E + n] = d * inv;
  }
  __syncthreads();
  // this CTA's columns of h and hb, computed as rms_norm computes them
#pragma unroll
  for (int u = 0; u < kTailPre; ++u) {
    const int i = tid + 128 * u, t = i / cols, c = c0 + i % cols;
    if (i >= T * cols || c >= H) continue;
    const float y = tail_w[u] * (tail_x[u] * s_inv[t]);
    h[size_t(t) * H + c] = y;
    hb[size_t(t) * H + c] = __float2bfloat16(y);
  }
  for (int i = tid + 128 * kTailPre; i < T * cols; i += 128) {
    const int t = i / cols, c = c0 + i % cols;
    if (c >= H) continue;
    const float y = norm_w[c] * (x[size_t(t) * H + c] * s_inv[t]);
    h[size_t(t) * H + c] = y;
    hb[size_t(t) * H + c] = __float2bfloat16(y);
  }
}

}  // namespace

bool legacy_kernels() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_UNFUSED");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}

bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_PDL");
    return !legacy_kernels() && !(v != nullptr && v[0] == '0');
  }();
  return on;
}

// (token, head) items per warp of qkv_post (qk_norm 0 or 1): 4 for steps of more than 64 tokens, where each warp
// needs more than one head's 512 bytes in flight, else 1 (decode steps: a warp per head, spread over the SMs).
// DISPATCH_CUDA_QKV_POST_ITEMS=1, 2, 4 or 8 forces it at every T (read per launch, for A/B runs). A count that does
// not divide Hq + 2 Hkv runs as 1.
static int qkv_post_items(int T, int heads) {
  const char* v = std::getenv("DISPATCH_CUDA_QKV_POST_ITEMS");
  const bool forced = v && (v[0] == '1' || v[0] == '2' || v[0] == '4' || v[0] == '8') && v[1] == '\0';
  const int n = forced ? v[0] - '0' : T > 64 ? 4 : 1;
  return heads % n == 0 ? n : 1;
}

bool qkv_post_supported(int Hq, int Hkv, int D) {
  return D % 2 == 0 && D > 0 && D <= kPostMaxDim && Hq > 0 && Hkv > 0;
}

void qkv_post(const QkvPostArgs& a, cudaStream_t s) {
  DC_CHECK(qkv_post_supported(a.Hq, a.Hkv, a.D), "qkv_post: head dim must be even and at most 256");
  DC_CHECK(a.qk_norm >= 0 && a.qk_norm <= 2, "qkv_post: qk_norm must be 0, 1 or 2");
  if (a.T == 0) return;
  if (a.qk_norm == 2) {
    launch_k(qkv_post_kernel<true>, dim3(a.T), dim3(kWholeThreads), 0, s, a);
  } else {
    const int items = a.T * (a.Hq + 2 * a.Hkv), per_cta = kPostThreads / 32;
    const int n = qkv_post_items(a.T, a.Hq + 2 * a.Hkv);  // a warp's items: heads of one token
    const dim3 grid((items / n + per_cta - 1) / per_cta);
    // kPairs 2 at D <= 128; DISPATCH_CUDA_QKV_POST_WIDE set: 4 at every D (read per launch, for A/B runs)
    auto items_kernel = [&](auto k2, auto k4) {
      const bool narrow = a.D <= 128 && std::getenv("DISPATCH_CUDA_QKV_POST_WIDE") == nullptr;
      launch_k(narrow ? k2 : k4, grid, dim3(kPostThreads), 0, s, a);
    };
    if (n == 8) items_kernel(qkv_post_items_kernel<8, 2>, qkv_post_items_kernel<8, 4>);
    else if (n == 4) items_kernel(qkv_post_items_kernel<4, 2>, qkv_post_items_kernel<4, 4>);
    else if (n == 2) items_kernel(qkv_post_items_kernel<2, 2>, qkv_post_items_kernel<2, 4>);
    else launch_k(qkv_post_kernel<false>, grid, dim3(kPostThreads), 0, s, a);
  }
  DC_LAUNCHED();
}

void rope_table(const int32_t* pos, int T, int D, const float* inv_freq, float* rope_cs, cudaStream_t s) {
  DC_CHECK(D % 2 == 0 && D > 0, "rope_table: head dim must be even");
  if (T == 0) return;
  const int n = T * (D / 2);
  launch_k(rope_table_kernel, dim3((n + 255) / 256), dim3(256), 0, s, pos, T, D / 2, inv_freq, rope_cs);
  DC_LAUNCHED();
}

void norm_router(const float* x, int T, int H, const float* norm_w, float eps, const float* W, int E, float* logits,
                 float* h, bf16* hb, cudaStream_t s) {
  DC_CHECK(T >= 1 && T <= kNormRouterMaxTokens, "norm_router: 1 to 16 tokens");
  DC_CHECK(H % 4 == 0 && E > 0, "norm_router: H must be a multiple of 4");
  const int cols = (H + E - 1) / E;
  auto kernel = T == 1 ? norm_router_kernel<1>
                : T == 2 ? norm_router_kernel<2>
                : T <= 4 ? norm_router_kernel<4>
                : T <= 8 ? norm_router_kernel<8>
                         : norm_router_kernel<16>;
  launch_k(kernel, dim3(E), dim3(128), 0, s, x, T, H, norm_w, eps, W, E, logits, h, hb, cols);
  DC_LAUNCHED();
}

void moe_combine_norm(const bf16* Y, const int32_t* slot_row, const float* weights, int T, int k, int H,
                      const float* shared, const float* gate, float* x, const float* norm_w, float eps,
                      bf16* out_bf16, cudaStream_t s) {
  DC_CHECK(H % 8 == 0, "moe_combine_norm: H must be a multiple of 8");
  DC_CHECK(!norm_w || out_bf16, "moe_combine_norm: a norm needs an output");
  if (T == 0) return;
  const int vecs = H / 8;
  const int threads = vecs >= 256 ? 256 : vecs >= 128 ? 128 : vecs > 32 ? 64 : 32;
  // (row, weight) pairs and Y rows in flight per thread and pass: 4 (80 registers, 3 CTAs of 256 threads per SM; 8
  // took 126, 2 CTAs: 142-144 us against 138 per 8,192-token chunk and layer on the H200, session 24), or
  // DISPATCH_CUDA_COMBINE_CHUNK=8 (read once, for A/B runs; the same sums in the same order, so the same bits)
  static const bool chunk8 = [] {
    const char* v = std::getenv("DISPATCH_CUDA_COMBINE_CHUNK");
    return v != nullptr && v[0] == '8';
  }();
  const auto kernel = chunk8 ? moe_combine_norm_kernel<8> : moe_combine_norm_kernel<4>;
  launch_k(kernel, dim3(T), dim3(threads), 0, s, reinterpret_cast<const uint4*>(Y), slot_row, weights, k, vecs, shared,
           gate, x, norm_w, eps, out_bf16);
  DC_LAUNCHED();
}

}  // namespace dcuda
