// qkv_post's work (fused_ops.cu) inside a decode attention CTA (attention_decode.cu, kFused): the
// CTA of (token t, KV head h, split) stages its raw rows in shared memory (one round trip) and
// normalizes, clips and rotates its G query heads there (redundant across splits: a few KB),
// and the CTA whose split holds the token's own key (the last key) also makes that key's k and v,
// writes them to the paged cache at the token's slot (slot < 0: nothing) and keeps them in shared
// memory, where its own reads of that key find them (no CTA reads a cache row this launch writes).
//
// The arithmetic is qkv_post_kernel<false>'s, expression for expression (same lane -> dim map,
// same sum order, same warp butterfly), so the cache rows come out bit-identical to qkv_post's:
// attention-check compares them. qk_norm 0 (none) or 1 (per head); the whole-projection norm
// (qk_norm 2) needs every head's sums and stays with qkv_post.
//
// Legend: G query heads per KV head, D head dim (even, <= 256), P = ceil(NB / 2) rotate-half
// pairs (i, i + D/2) per lane, i = lane + 32 j.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>
#include "fused_ops.h"

namespace dcuda {
namespace decode_qkv {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The token's sines and cosines and the norm weights of a lane's pairs: step metadata and weights,
// read before pdl_wait as qkv_post reads them.
template <int P>
struct Rope {
  float cs[P], sn[P], wq0[P], wq1[P], wk0[P], wk1[P];
  __device__ __forceinline__ void load(const QkvPostArgs& p, int pos, int D, int lane) {
    const float pf = float(pos);
    const int half = D / 2;
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int i = lane + 32 * j;
      cs[j] = 1.f, sn[j] = 0.f, wq0[j] = 1.f, wq1[j] = 1.f, wk0[j] = 1.f, wk1[j] = 1.f;
      if (i < half) {
        const float angle = pf * p.inv_freq[i];
        sincosf(angle, &sn[j], &cs[j]);
        if (p.qk_norm == 1) {
          wq0[j] = p.q_norm[i], wq1[j] = p.q_norm[i + half];
          wk0[j] = p.k_norm[i], wk1[j] = p.k_norm[i + half];
        }
      }
    }
  }
};

// All threads: the CTA's raw rows into shared memory, one round trip (every load of a thread in
// flight before its stores): the G query heads h*G .. h*G + G - 1 (contiguous in the row) to s_q
// [G][D], with `own` the KV head's k and v to s_k, s_v [D]. p.qkv 16-byte aligned, D % 8 == 0.
template <int kThreads>
__device__ __forceinline__ void stage_raw(const QkvPostArgs& p, int t, int h, int G, int D, bool own, float* s_q,
                                          float* s_k, float* s_v) {
  const size_t ld = size_t(p.Hq + 2 * p.Hkv) * D;
  const float4* q = reinterpret_cast<const float4*>(p.qkv + size_t(t) * ld + size_t(h) * G * D);
  const float4* k = reinterpret_cast<const float4*>(p.qkv + size_t(t) * ld + size_t(p.Hq + h) * D);
  const float4* v = reinterpret_cast<const float4*>(p.qkv + size_t(t) * ld + size_t(p.Hq + p.Hkv + h) * D);
  const int q4 = G * D / 4, d4 = D / 4, n = q4 + (own ? 2 * d4 : 0);
  auto src = [&](int i) { return i < q4 ? q + i : i < q4 + d4 ? k + (i - q4) : v + (i - q4 - d4); };
  auto dst = [&](int i) {
    return reinterpret_cast<float4*>(i < q4 ? s_q + 4 * i : i < q4 + d4 ? s_k + 4 * (i - q4) : s_v + 4 * (i - q4 - d4));
  };
  constexpr int kU = 2;
  for (int i0 = threadIdx.x; i0 < n; i0 += kU * kThreads) {
    float4 x[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (i0 + u * kThreads < n) x[u] = *src(i0 + u * kThreads);
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (i0 + u * kThreads < n) *dst(i0 + u * kThreads) = x[u];
  }
}

// After stage_raw and a barrier: warp `warp` of W takes items warp, warp + W, ...: items 0..G-1
// the query heads (rotated fp32 back into s_q, each lane over the dims it read); with `own`, item
// G the KV head's k and item G + 1 its v (bf16 to new_k / new_v [D] and, slot >= 0, to the caches).
// The caller syncs the CTA before reading s_q, new_k, new_v.
template <int P, int W>
__device__ __forceinline__ void make_qkv(const QkvPostArgs& p, const Rope<P>& rp, int h, int G, int D, bool own,
                                         int slot, float* s_q, const float* s_k, const float* s_v, bf16* new_k,
                                         bf16* new_v, int warp, int lane) {
  const int half = D / 2, W_ = p.Hkv * D;
  const float clip = p.clip;
  const int items = G + (own ? 2 : 0);
  for (int it = warp; it < items; it += W) {
    if (it == G + 1) {  // v: clip, then bf16
      bf16* vc = slot >= 0 ? p.v_cache + size_t(slot) * W_ + size_t(h) * D : nullptr;
#pragma unroll
      for (int j = 0; j < 2 * P; ++j) {
        if (lane + 32 * j >= D) continue;
        float v = s_v[lane + 32 * j];
        if (clip > 0.f) v = fminf(clip, fmaxf(-clip, v));
        const bf16 b = __float2bfloat16(v);
        new_v[lane + 32 * j] = b;
        if (vc) vc[lane + 32 * j] = b;
      }
      continue;
    }
    const bool is_q = it < G;
    float* x = is_q ? s_q + size_t(it) * D : nullptr;
    const float* xr = is_q ? x : s_k;
    float x0[P], x1[P];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int i = lane + 32 * j;
      x0[j] = 0.f, x1[j] = 0.f;
      if (i < half) x0[j] = xr[i], x1[j] = xr[i + half];
      ss += x0[j] * x0[j] + x1[j] * x1[j];
    }
    float f = 1.f;
    if (p.qk_norm == 1) f = 1.f / sqrtf(warp_sum(ss) / float(D) + p.eps);
    bf16* kc = !is_q && slot >= 0 ? p.k_cache + size_t(slot) * W_ + size_t(h) * D : nullptr;
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int i = lane + 32 * j;
      if (i >= half) continue;
      float v0 = x0[j], v1 = x1[j];
      if (p.qk_norm == 1) {
        const float w0 = is_q ? rp.wq0[j] : rp.wk0[j], w1 = is_q ? rp.wq1[j] : rp.wk1[j];
        v0 = w0 * (v0 * f), v1 = w1 * (v1 * f);
      }
      if (clip > 0.f) v0 = fminf(clip, fmaxf(-clip, v0)), v1 = fminf(clip, fmaxf(-clip, v1));
      const float r0 = v0 * rp.cs[j] - v1 * rp.sn[j];
      const float r1 = v1 * rp.cs[j] + v0 * rp.sn[j];
      if (is_q) {
        x[i] = r0, x[i + half] = r1;
      } else {
        const bf16 k0 = __float2bfloat16(r0), k1 = __float2bfloat16(r1);
        new_k[i] = k0, new_k[i + half] = k1;
        if (kc) kc[i] = k0, kc[i + half] = k1;
      }
    }
  }
}

}  // namespace decode_qkv
}  // namespace dcuda
