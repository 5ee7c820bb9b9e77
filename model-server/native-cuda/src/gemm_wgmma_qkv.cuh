// The q|k|v projection's epilogue with qkv_post folded in (gemm_qkv_post() in gemm.cu, session 24): the prefill GEMM
// (gemm_wgmma_tiled.cuh) computes a tile of q|k|v and, from its registers, does qkv_post's per-head work (fused_ops.h:
// q/k RMSNorm per head, clip, rotate-half RoPE; q back into Y in fp32 for attention, k and v to the paged cache in
// bf16) instead of writing the fp32 tile for qkv_post to read back (at 8,192 tokens per chunk that round trip moved
// 319 MB per layer in a kernel of its own). The per-element expressions are qkv_post_kernel<false>'s; the sum of
// squares of a head is added in another order (a quad's partial sums over its lanes' columns), so q and k may differ
// from qkv_post's in the last fp32 bit. k and v are not written to Y (nothing reads them there after the cache write).
//
// D = 128 and BN a multiple of it, so a tile holds whole heads; qk_norm 0 or 1 (2 needs the whole projection's
// sum). Accumulator layout (gemm_wgmma_tiled.cuh): d[4j + c] is token row + 8 (c >> 1), output 8j + 2 tig + (c & 1)
// of the tile, so a row's 128 outputs of one head are the quad's 4 lanes x 16 n8 blocks x 2, and the rotate-half
// partners i and i + 64 (blocks j and j + 8) sit in the same lane.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>
#include "fused_ops.h"

namespace dcuda {
namespace mma {

constexpr int kQkvHeadDim = 128;

// a: by value, so its fields sit in registers: read through a reference to the kernel's __grid_constant__ parameter,
// every use after a store to Y or the caches was a fresh dependent load (the compiler cannot rule out that the stores
// alias it), and the first build of this epilogue cost ~15-20 us per tile on the H200 (session 24).
template <int BN>
__device__ __forceinline__ void wgmma_qkv_post_epilogue(const float (&acc)[BN / 2], const QkvPostArgs a,
                                                        const float* __restrict__ bias, int row, int n, int lane,
                                                        int T, int N, float* __restrict__ Y) {
  constexpr int D = kQkvHeadDim, kHeads = BN / D, half = D / 2;
  const int tig = lane & 3;
  const unsigned quad = 0xfu << (lane & ~3);  // the 4 lanes holding one row
  const int Hq = a.Hq, heads = a.Hq + a.Hkv, all = heads + a.Hkv, W = a.Hkv * D, qk_norm = a.qk_norm;
  const int h0 = n * kHeads;  // the tile's first head
  const float clip = a.clip, eps = a.eps;
  const float* __restrict__ q_norm = a.q_norm;
  const float* __restrict__ k_norm = a.k_norm;
  const float* __restrict__ inv_freq = a.inv_freq;
  const float* __restrict__ rope_cs = a.rope_cs;
  const int32_t* __restrict__ pos = a.pos;
  const int32_t* __restrict__ slots = a.slots;
  bf16* __restrict__ k_cache = a.k_cache;
  bf16* __restrict__ v_cache = a.v_cache;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int t = row + 8 * hr;
    if (t >= T) continue;  // the same for the quad's 4 lanes
    const int slot = __ldg(slots + t);
    // sines and cosines of this row's rotate-half columns i = 8 jj + 2 tig + e (jj < 8), shared by the tile's heads
    float cs[16], sn[16];
    if (h0 < heads && rope_cs != nullptr) {  // the step's table (rope_table): the same values, no sincosf here
      const float* r = rope_cs + size_t(t) * D;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float2 c = __ldg(reinterpret_cast<const float2*>(r + 8 * jj + 2 * tig));
        const float2 z = __ldg(reinterpret_cast<const float2*>(r + half + 8 * jj + 2 * tig));
        cs[2 * jj] = c.x, cs[2 * jj + 1] = c.y, sn[2 * jj] = z.x, sn[2 * jj + 1] = z.y;
      }
    } else if (h0 < heads) {
      const float p = float(__ldg(pos + t));
#pragma unroll
      for (int q = 0; q < 16; ++q) {
        const int i = 8 * (q >> 1) + 2 * tig + (q & 1);
        sincosf(p * __ldg(inv_freq + i), &sn[q], &cs[q]);
      }
    }
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      const int h = h0 + hh;
      if (h >= all) break;
      // column 8 jj + 2 tig + e of head hh in this row: the GEMM's output, bias added as the plain epilogue does
      auto val = [&](int jj, int e) {
        const float b = bias != nullptr ? __ldg(bias + size_t(h) * D + 8 * jj + 2 * tig + e) : 0.f;
        return acc[4 * (16 * hh + jj) + 2 * hr + e] + b;
      };
      if (h >= heads) {  // v: clip, then to the cache as bf16
        if (slot < 0) continue;
        bf16* vc = v_cache + size_t(slot) * W + size_t(h - heads) * D;
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          float v0 = val(jj, 0), v1 = val(jj, 1);
          if (clip > 0.f) v0 = fminf(clip, fmaxf(-clip, v0)), v1 = fminf(clip, fmaxf(-clip, v1));
          *reinterpret_cast<__nv_bfloat162*>(vc + 8 * jj + 2 * tig) = __halves2bfloat162(__float2bfloat16(v0),
                                                                                        __float2bfloat16(v1));
        }
        continue;
      }
      const bool is_q = h < Hq;
      float f = 1.f;
      if (qk_norm == 1) {
        float ss = 0.f;
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          const float v0 = val(jj, 0), v1 = val(jj, 1);
          ss += v0 * v0 + v1 * v1;
        }
        ss += __shfl_xor_sync(quad, ss, 1);
        ss += __shfl_xor_sync(quad, ss, 2);
        f = 1.f / sqrtf(ss / float(D) + eps);
      }
      const float* __restrict__ nw = is_q ? q_norm : k_norm;
      bf16* kc = !is_q && slot >= 0 ? k_cache + size_t(slot) * W + size_t(h - Hq) * D : nullptr;
      float* yq = Y + size_t(t) * N + size_t(h) * D;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const int i = 8 * jj + 2 * tig;
        float r0[2], r1[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float v0 = val(jj, e), v1 = val(jj + 8, e);
          if (qk_norm == 1) v0 = __ldg(nw + i + e) * (v0 * f), v1 = __ldg(nw + i + e + half) * (v1 * f);
          if (clip > 0.f) v0 = fminf(clip, fmaxf(-clip, v0)), v1 = fminf(clip, fmaxf(-clip, v1));
          const int q = 2 * jj + e;
          r0[e] = v0 * cs[q] - v1 * sn[q];
          r1[e] = v1 * cs[q] + v0 * sn[q];
        }
        if (is_q) {
          *reinterpret_cast<float2*>(yq + i) = make_float2(r0[0], r0[1]);
          *reinterpret_cast<float2*>(yq + i + half) = make_float2(r1[0], r1[1]);
        } else if (kc) {
          *reinterpret_cast<__nv_bfloat162*>(kc + i) = __halves2bfloat162(__float2bfloat16(r0[0]),
                                                                          __float2bfloat16(r0[1]));
          *reinterpret_cast<__nv_bfloat162*>(kc + i + half) = __halves2bfloat162(__float2bfloat16(r1[0]),
                                                                                 __float2bfloat16(r1[1]));
        }
      }
    }
  }
}

}  // namespace mma
}  // namespace dcuda
