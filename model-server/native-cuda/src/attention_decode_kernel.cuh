// The decode attention kernel (attention_decode.cu has the algorithm): one CTA per (split, KV head,
// token) runs its split's keys for the KV head's query heads, merges its warps, then writes the
// output (one split), or its part for the cluster merge (attention_decode_cluster.cuh), or its part
// for the split-K merge by the last CTA to arrive (at the end of the kernel: moved into a function
// of its own, its early returns changed the kernel's generated code).
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include "attention_decode_cluster.cuh"
#include "attention_decode_core.cuh"
#include "attention_decode_qkv.cuh"
#include "pdl.h"

namespace dcuda {
namespace decode_attn {
// internal to each including TU (splitk.cu, cluster.cu instantiate disjoint sets), as when the
// kernel lived in one .cu: the split kept every instantiation's SASS byte-identical
namespace {

// NB = ceil(D / 32): 32-dim pieces of a row; lane c of a quad holds dims [32 nb + 8c, 32 nb + 8c + 8).
// W warps per CTA. kCluster: the grid's nsplit CTAs of one (token, KV head) form a thread-block
// cluster and merge through distributed shared memory (ws_o, ws_ml, counters unused); else the
// split-K merge through the workspace and the last CTA to arrive. kFused: q comes from the raw
// projection p.qkv through qkv_post's math, and the CTA holding the token's own key writes that
// key's k and v (attention_decode_qkv.cuh); a.q is not read.
template <int NB, int W, bool kCluster, bool kFused>
__global__ void __launch_bounds__(W * 32) sm90_bf16_attention_decode_paged(AttentionArgs a, int G, float* ws_o,
                                                                            float2* ws_ml, int* counters,
                                                                            QkvPostArgs p) {
  constexpr int kWarps = W;  // shadows the split-K kernel's 4
  constexpr int kThreads = W * 32;
  extern __shared__ float smem[];  // s_m [kWarps][16], s_l [kWarps][16], s_o [kWarps or 1][G][D]
  __shared__ int s_last;
  __shared__ float2 s_cml[kMaxGroup];  // kCluster: the CTA's (M, L) per head
  __shared__ __align__(16) bf16 s_new[2][kFused ? kMaxDim : 8];  // kFused: the token's own k and v
  __shared__ __align__(16) float s_raw[2][kFused ? kMaxDim : 4];  // kFused: their raw rows
  pdl_trigger();
  const int split = blockIdx.x, nsplit = gridDim.x, kvh = blockIdx.y, t = blockIdx.z;
  // pos, tok_seq and the block tables are step metadata (copied in before the step's first
  // kernel, written by none): they and the first block's cache rows are looked up before
  // pdl_wait; q and the caches (this step's K/V rows come from the previous kernel) after it
  const Split sp = split_of<W>(a, t, split, nsplit);
  // past the token's keys (short context): nothing to do (a cluster CTA stays: its cluster's
  // barriers count every CTA, and its empty (m = -inf, l = 0) part merges as nothing)
  if (sp.lo > sp.hi && (!kCluster || sp.active == 1)) return;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 2, c = lane & 3;  // fragment row (query head r and r + 8; key r) and column pair
  const int D = a.D;
  constexpr bool kEarlyLoads = NB <= 4;
  // D <= 128: q and P each go through the MMAs as bf16 hi + lo parts, so the scores and the
  // weighted sum keep ~16 bits of q and P (the per-head kernel's fp32 q and P, near enough: with
  // q and P rounded to bf16 once, the CUDA golden test's OLMoE fixture drifted past its bf16
  // bounds on the H200); the extra MMAs are free in a kernel bound by reading K and V.
  constexpr bool kSplitQP = NB <= 4;
  // kFused: the token's own key (its position) is read from s_new by the CTA that holds it
  const int pos = a.pos[t];
  const bool own = kFused && sp.lo <= pos && pos <= sp.hi;
  auto fresh = [&](int key) { return own && key >= pos; };  // keys past pos: clamped to pos, masked
  constexpr int kPairs = (NB + 1) / 2;
  decode_qkv::Rope<kPairs> rope;
  int slot = -1;
  if constexpr (kFused) {
    if (sp.lo <= sp.hi) rope.load(p, pos, D, lane);
    if (own) slot = p.slots[t];
  }

  const int32_t* table = a.tables + size_t(a.tok_seq[t]) * a.table_stride;
  const size_t row_stride = size_t(a.Hkv) * D;  // elements from one cache slot to the next
  const size_t head_off = size_t(kvh) * D;
  auto row_of = [&](int key) { return (size_t(table[key / a.B]) * a.B + key % a.B) * row_stride + head_off; };
  // K and V lines of two rows toward L2 (a hint, no value read: L2 is where the previous kernel's
  // writes land, so a line prefetched before they complete is still current); the 4 lanes of a
  // row split its 128-byte lines
  auto prefetch_rows = [&](size_t ra, size_t rb, bool l1 = false) {
    const int lines = (D * 2 + 127) / 128;  // per row of K or of V
    for (int li = c; li < 2 * lines; li += 4) {
      const bf16* cache = li < lines ? a.k_cache : a.v_cache;
      const int off = (li < lines ? li : li - lines) * 64;
      if (l1) prefetch_l1(cache + ra + off), prefetch_l1(cache + rb + off);
      else prefetch_l2(cache + ra + off), prefetch_l2(cache + rb + off);
    }
  };
  int j0 = sp.lo + kBlockKeys * warp;
  size_t base_a = 0, base_b = 0;
  if (j0 <= sp.hi) {
    // this lane's rows of the warp's first block: keys j0 + r and j0 + 8 + r (clamped to the
    // split: masked below); their HBM reads start while the previous kernel finishes
    base_a = row_of(min(j0 + r, sp.hi)), base_b = row_of(min(j0 + 8 + r, sp.hi));
    prefetch_rows(base_a, base_b);
  }
  pdl_wait();

  // the lane's 8 dims [32 nb + 8c, +8) of a row of K (kv 0) or V (kv 1) (zeros past D); a fresh
  // row (the token's own key, kFused) from s_new
  auto load = [&](int kv, size_t base, bool is_new, int nb) {
    const int d0 = nb * 32 + 8 * c;
    if (d0 >= D) return make_uint4(0, 0, 0, 0);
    if (kFused && is_new) return *reinterpret_cast<const uint4*>(&s_new[kv][d0]);
    return __ldg(reinterpret_cast<const uint4*>((kv ? a.v_cache : a.k_cache) + base + d0));
  };
  // D <= 128: all of a block's K and V loads in flight together; above, K and V are loaded piece
  // by piece where used (registers: Q and O alone take 3 * 8 * NB)
  uint4 k_a[NB], k_b[NB], v_a[NB], v_b[NB];
  auto load_block = [&](int j) {  // the block of keys j + [0, 16)
    const bool fa = fresh(j + r), fb = fresh(j + 8 + r);
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      k_a[nb] = load(0, base_a, fa, nb), k_b[nb] = load(0, base_b, fb, nb);
      v_a[nb] = load(1, base_a, fa, nb), v_b[nb] = load(1, base_b, fb, nb);
    }
  };
  // cluster kernel: the first block's K/V loads go out before q's, so the two round trips after
  // pdl_wait overlap instead of following each other. kFused: not hoisted (its registers, live
  // through the q/k/v prologue, made the NB 4 cluster kernel spill); the rows are prefetched to
  // L1 instead, so their loads after the prologue hit L1 (row pos is read from s_new)
  constexpr bool kHoistFirst = kEarlyLoads && kCluster && !kFused;
  if (kFused && j0 <= sp.hi) prefetch_rows(base_a, base_b, true);
  const int j_first = j0;
  if (kHoistFirst && j0 <= sp.hi) load_block(j0);

  if constexpr (kFused) {
    if (sp.lo <= sp.hi) {  // uniform over the CTA
      // s_q [G][D] over s_o: the warps' merge writes s_o only after the main loop (and a barrier)
      float* s_q = smem + 2 * kWarps * 16;
      decode_qkv::stage_raw<kThreads>(p, t, kvh, G, D, own, s_q, s_raw[0], s_raw[1]);
      __syncthreads();
      decode_qkv::make_qkv<kPairs, kWarps>(p, rope, kvh, G, D, own, slot, s_q, s_raw[0], s_raw[1], s_new[0], s_new[1],
                                           warp, lane);
      __syncthreads();
    }
  }

  // Q as the MMA A operand, two k16 steps per 32-dim piece: step 0 takes dims 8c + {0,1} (cols 2c,
  // 2c+1) and 8c + {2,3} (cols 2c+8, 2c+9), step 1 takes 8c + {4,5} and 8c + {6,7}.
  uint32_t qa[NB][2][4];
  uint32_t ql[kSplitQP ? NB : 1][2][4];  // q - bf16(q), rounded to bf16 (kSplitQP)
  {
    const float qs = a.scale * kLog2e;
    // kFused: the rotated rows the CTA just made in shared memory
    const float* qrow = kFused ? smem + 2 * kWarps * 16 : a.q + size_t(t) * a.ldq + size_t(kvh) * G * D;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      const int d0 = nb * 32 + 8 * c;
      float q0[8], q1[8];
      auto load_q = [&](int g, float (&q)[8]) {  // 8 dims as two float4 (q, ldq 16-byte aligned)
        float4 u = make_float4(0.f, 0.f, 0.f, 0.f), v = u;
        if (g < G && d0 < D) {
          const float4* src = reinterpret_cast<const float4*>(qrow + size_t(g) * D + d0);
          u = src[0], v = src[1];
        }
        q[0] = u.x * qs, q[1] = u.y * qs, q[2] = u.z * qs, q[3] = u.w * qs;
        q[4] = v.x * qs, q[5] = v.y * qs, q[6] = v.z * qs, q[7] = v.w * qs;
      };
      load_q(r, q0);
      load_q(r + 8, q1);
#pragma unroll
      for (int st = 0; st < 2; ++st) {
        qa[nb][st][0] = pack_bf16(q0[4 * st], q0[4 * st + 1]);
        qa[nb][st][1] = pack_bf16(q1[4 * st], q1[4 * st + 1]);
        qa[nb][st][2] = pack_bf16(q0[4 * st + 2], q0[4 * st + 3]);
        qa[nb][st][3] = pack_bf16(q1[4 * st + 2], q1[4 * st + 3]);
        if constexpr (kSplitQP) {
          ql[nb][st][0] = pack_bf16(q0[4 * st] - lo_f(qa[nb][st][0]), q0[4 * st + 1] - hi_f(qa[nb][st][0]));
          ql[nb][st][1] = pack_bf16(q1[4 * st] - lo_f(qa[nb][st][1]), q1[4 * st + 1] - hi_f(qa[nb][st][1]));
          ql[nb][st][2] = pack_bf16(q0[4 * st + 2] - lo_f(qa[nb][st][2]), q0[4 * st + 3] - hi_f(qa[nb][st][2]));
          ql[nb][st][3] = pack_bf16(q1[4 * st + 2] - lo_f(qa[nb][st][3]), q1[4 * st + 3] - hi_f(qa[nb][st][3]));
        }
      }
    }
  }

  // O accumulators: n-tile (nb, j) holds dims 32 nb + 8c + 2j + {0,1} of rows r (o[..][0..1]) and r + 8
  float o[NB][4][4];
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nb][j][e] = 0.f;
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.f, 0.f};
  bool any = false;

  for (; j0 <= sp.hi; j0 += kBlockKeys * kWarps) {
    if (kEarlyLoads && !(kHoistFirst && j0 == j_first)) load_block(j0);
    const bool fa = fresh(j0 + r), fb = fresh(j0 + 8 + r);
    // the warp's next block: its block-table reads overlap this block's math
    const int jn = j0 + kBlockKeys * kWarps;
    size_t next_a = base_a, next_b = base_b;
    if (jn <= sp.hi) next_a = row_of(min(jn + r, sp.hi)), next_b = row_of(min(jn + 8 + r, sp.hi));
    // S: sa = keys j0 + [0, 8), sb = keys j0 + [8, 16); [0..1] row r, [2..3] row r + 8, cols 2c, 2c+1
    // (kSplitQP: the lo parts go to their own accumulators, added at the end, so each dependent
    // MMA chain is half as long)
    float sa[4] = {0.f, 0.f, 0.f, 0.f}, sb[4] = {0.f, 0.f, 0.f, 0.f};
    float sal[4] = {0.f, 0.f, 0.f, 0.f}, sbl[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      if (!kEarlyLoads) k_a[nb] = load(0, base_a, fa, nb), k_b[nb] = load(0, base_b, fb, nb);
      mma_bf16_16816(sa, qa[nb][0], k_a[nb].x, k_a[nb].y);
      mma_bf16_16816(sa, qa[nb][1], k_a[nb].z, k_a[nb].w);
      mma_bf16_16816(sb, qa[nb][0], k_b[nb].x, k_b[nb].y);
      mma_bf16_16816(sb, qa[nb][1], k_b[nb].z, k_b[nb].w);
      if constexpr (kSplitQP) {
        mma_bf16_16816(sal, ql[nb][0], k_a[nb].x, k_a[nb].y);
        mma_bf16_16816(sal, ql[nb][1], k_a[nb].z, k_a[nb].w);
        mma_bf16_16816(sbl, ql[nb][0], k_b[nb].x, k_b[nb].y);
        mma_bf16_16816(sbl, ql[nb][1], k_b[nb].z, k_b[nb].w);
      }
    }
    if constexpr (kSplitQP) {
#pragma unroll
      for (int i = 0; i < 4; ++i) sa[i] += sal[i], sb[i] += sbl[i];
    }
    // the next block's K and V rows toward L2 now (its table entries arrived during the MMAs
    // above), so its loads wait on L2, not HBM
    if (jn <= sp.hi) prefetch_rows(next_a, next_b);
    const int key = j0 + 2 * c;
    if (key > sp.hi) sa[0] = sa[2] = -INFINITY;
    if (key + 1 > sp.hi) sa[1] = sa[3] = -INFINITY;
    if (key + 8 > sp.hi) sb[0] = sb[2] = -INFINITY;
    if (key + 9 > sp.hi) sb[1] = sb[3] = -INFINITY;
    // key j0 is in the split, so every row's max over the block is finite
    float mx0 = fmaxf(fmaxf(sa[0], sa[1]), fmaxf(sb[0], sb[1]));
    float mx1 = fmaxf(fmaxf(sa[2], sa[3]), fmaxf(sb[2], sb[3]));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m[0], mx0), mn1 = fmaxf(m[1], mx1);
    const float c0 = any ? exp2f(m[0] - mn0) : 0.f, c1 = any ? exp2f(m[1] - mn1) : 0.f;
    m[0] = mn0, m[1] = mn1;
    any = true;
    uint32_t pa[4], pl[4];
    {
      const float p[8] = {exp2f(sa[0] - mn0), exp2f(sa[1] - mn0), exp2f(sa[2] - mn1), exp2f(sa[3] - mn1),
                          exp2f(sb[0] - mn0), exp2f(sb[1] - mn0), exp2f(sb[2] - mn1), exp2f(sb[3] - mn1)};
      pa[0] = pack_bf16(p[0], p[1]), pa[1] = pack_bf16(p[2], p[3]);
      pa[2] = pack_bf16(p[4], p[5]), pa[3] = pack_bf16(p[6], p[7]);
      if constexpr (kSplitQP) {
        // P = hi + lo, both bf16: P V keeps ~16 bits of P; l sums the fp32 P
#pragma unroll
        for (int i = 0; i < 4; ++i)
          pl[i] = pack_bf16(p[2 * i] - lo_f(pa[i]), p[2 * i + 1] - hi_f(pa[i]));
        l[0] = l[0] * c0 + (p[0] + p[1]) + (p[4] + p[5]);
        l[1] = l[1] * c1 + (p[2] + p[3]) + (p[6] + p[7]);
      } else {
        l[0] = l[0] * c0 + (lo_f(pa[0]) + hi_f(pa[0])) + (lo_f(pa[2]) + hi_f(pa[2]));
        l[1] = l[1] * c1 + (lo_f(pa[1]) + hi_f(pa[1])) + (lo_f(pa[3]) + hi_f(pa[3]));
      }
    }
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      if (!kEarlyLoads) v_a[nb] = load(1, base_a, fa, nb), v_b[nb] = load(1, base_b, fb, nb);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        o[nb][j][0] *= c0, o[nb][j][1] *= c0, o[nb][j][2] *= c1, o[nb][j][3] *= c1;
        // register j of the loaded rows is an 8x8 tile (keys x dims 8c + 2j + {0,1}); transposed it
        // is the B fragment (keys 2c, 2c+1 x output column r) of n-tile (nb, j)
        const uint32_t vt_a = transpose_8x8(word(v_a[nb], j)), vt_b = transpose_8x8(word(v_b[nb], j));
        mma_bf16_16816(o[nb][j], pa, vt_a, vt_b);
        if constexpr (kSplitQP) mma_bf16_16816(o[nb][j], pl, vt_a, vt_b);
      }
    }
    base_a = next_a, base_b = next_b;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }

  // merge the warps: s_o[g][d] = sum_w O_w * 2^(m_w - M)
  float* s_m = smem;
  float* s_l = smem + kWarps * 16;
  float* s_o = smem + 2 * kWarps * 16;
  if (c == 0) {
    s_m[warp * 16 + r] = any ? m[0] : -INFINITY, s_m[warp * 16 + r + 8] = any ? m[1] : -INFINITY;
    s_l[warp * 16 + r] = l[0], s_l[warp * 16 + r + 8] = l[1];
  }
  __syncthreads();
  float wgt[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w * 16 + r + 8 * i]);
    wgt[i] = any ? exp2f(m[i] - mx) : 0.f;  // a warp with a block makes mx finite
  }
  const bool slabs = merge_slabs<W, kCluster, kFused>(G, D);
  if (slabs) {
    // a slab per warp: every warp writes at once (two float4 per row and 32 dims), one barrier
    float* mine = s_o + size_t(warp) * G * D;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      const int d0 = nb * 32 + 8 * c;
      if (d0 >= D) continue;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int g = r + 8 * i;
        if (g >= G) continue;
        float4* dst = reinterpret_cast<float4*>(mine + size_t(g) * D + d0);
        dst[0] = make_float4(o[nb][0][2 * i] * wgt[i], o[nb][0][2 * i + 1] * wgt[i], o[nb][1][2 * i] * wgt[i],
                             o[nb][1][2 * i + 1] * wgt[i]);
        dst[1] = make_float4(o[nb][2][2 * i] * wgt[i], o[nb][2][2 * i + 1] * wgt[i], o[nb][3][2 * i] * wgt[i],
                             o[nb][3][2 * i + 1] * wgt[i]);
      }
    }
    __syncthreads();
  }
  for (int w = 0; w < (slabs ? 0 : kWarps); ++w) {
    if (warp == w) {
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        const int d0 = nb * 32 + 8 * c;
        if (d0 >= D) continue;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int g = r + 8 * i;
          if (g >= G) continue;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float* dst = s_o + size_t(g) * D + d0 + 2 * j + e;
              const float v = o[nb][j][2 * i + e] * wgt[i];
              *dst = w == 0 ? v : *dst + v;
            }
          }
        }
      }
    }
    __syncthreads();
  }

  // items: (query head g, 8 dims from d); M, L of the CTA per head
  const int per_row = D / 8, items = G * per_row;
  const size_t part = (size_t(t) * a.Hkv + kvh) * nsplit;  // this token's first partial
  for (int it = threadIdx.x; it < items; it += kThreads) {
    const int g = it / per_row, d = (it % per_row) * 8;
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, s_m[w * 16 + g]);
    float L = 0.f;
    for (int w = 0; w < kWarps; ++w) L += s_m[w * 16 + g] == -INFINITY ? 0.f : s_l[w * 16 + g] * exp2f(s_m[w * 16 + g] - M);
    float src[8];  // sum over the warps in warp order, as the serial merge adds them
    {
      const float4* p0 = reinterpret_cast<const float4*>(s_o + size_t(g) * D + d);
      float4 u = p0[0], v = p0[1];
      for (int w = 1; w < (slabs ? kWarps : 1); ++w) {
        const float4* pw = reinterpret_cast<const float4*>(s_o + (size_t(w) * G + g) * D + d);
        const float4 uw = pw[0], vw = pw[1];
        u.x += uw.x, u.y += uw.y, u.z += uw.z, u.w += uw.w;
        v.x += vw.x, v.y += vw.y, v.z += vw.z, v.w += vw.w;
      }
      src[0] = u.x, src[1] = u.y, src[2] = u.z, src[3] = u.w, src[4] = v.x, src[5] = v.y, src[6] = v.z, src[7] = v.w;
    }
    if (sp.active == 1) {
      const float inv = 1.f / L;
      uint4 v;
      v.x = pack_bf16(src[0] * inv, src[1] * inv), v.y = pack_bf16(src[2] * inv, src[3] * inv);
      v.z = pack_bf16(src[4] * inv, src[5] * inv), v.w = pack_bf16(src[6] * inv, src[7] * inv);
      *reinterpret_cast<uint4*>(a.out + size_t(t) * a.Hq * D + (size_t(kvh) * G + g) * D + d) = v;
    } else if constexpr (kCluster) {
      // the CTA's part stays in its shared memory for the cluster's merge: O over slab 0 (this
      // thread alone reads and writes these 8 floats of every slab), (M, L) per head
      float4* dst = reinterpret_cast<float4*>(s_o + size_t(g) * D + d);
      dst[0] = make_float4(src[0], src[1], src[2], src[3]);
      dst[1] = make_float4(src[4], src[5], src[6], src[7]);
      if (d == 0) s_cml[g] = make_float2(M, L);
    } else {
      float* dst = ws_o + ((part + split) * G + g) * D + d;
      reinterpret_cast<float4*>(dst)[0] = make_float4(src[0], src[1], src[2], src[3]);
      reinterpret_cast<float4*>(dst)[1] = make_float4(src[4], src[5], src[6], src[7]);
      if (d == 0) ws_ml[(part + split) * G + g] = make_float2(M, L);
    }
  }
  if (sp.active == 1) return;
  if constexpr (kCluster) {
    cluster_merge<W>(a, G, sp.active, s_o, s_cml, t, kvh, split);
    return;
  } else {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      int* counter = counters + size_t(t) * a.Hkv + kvh;
      const int before = atomicAdd(counter, 1);
      s_last = before == sp.active - 1;
      if (s_last) atomicExch(counter, 0);  // zero for the next launch (graph replays reuse it)
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (sp.active <= kMergeChunk) {
      // few splits (T = 1 up to 512 keys): per item (head g, 8 dims) every split's (m, l) and O
      // part are loaded together, one round trip, no shared staging or barriers
      for (int it = threadIdx.x; it < items; it += kThreads) {
        const int g = it / per_row, d = (it % per_row) * 8;
        const float2* ml = ws_ml + part * G + g;         // split s: ml[s * G]
        const float* ob = ws_o + (part * G + g) * D + d;  // split s: ob + s * G * D
        float2 mlc[kMergeChunk];
        float4 xa[kMergeChunk], xb[kMergeChunk];
#pragma unroll
        for (int u = 0; u < kMergeChunk; ++u) {
          if (u >= sp.active) break;
          mlc[u] = __ldcg(ml + size_t(u) * G);
          const float4* src = reinterpret_cast<const float4*>(ob + size_t(u) * G * D);
          xa[u] = __ldcg(src), xb[u] = __ldcg(src + 1);
        }
        float M = -INFINITY;
#pragma unroll
        for (int u = 0; u < kMergeChunk; ++u)
          if (u < sp.active) M = fmaxf(M, mlc[u].x);
        float L = 0.f, acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int u = 0; u < kMergeChunk; ++u) {
          if (u >= sp.active) break;
          const float w = exp2f(mlc[u].x - M);
          L += mlc[u].y * w;
          add_weighted8(acc, xa[u], xb[u], w);
        }
        store_out8(a, D, G, t, kvh, g, d, acc, 1.f / L);
      }
      return;
    }
    // many splits: the (m, l) of every split staged in shared memory by all threads (one round
    // trip), the weights per (split, head) computed once, then O = sum_s w O_s per item
    __shared__ float2 s_ml[kMaxSplits * kMaxGroup];
    __shared__ float s_inv[kMaxGroup];
    const int n_ml = sp.active * G;
    for (int i = threadIdx.x; i < n_ml; i += kThreads) s_ml[i] = __ldcg(&ws_ml[part * G + i]);
    __syncthreads();
    if (threadIdx.x < G) {
      const int g = threadIdx.x;
      float M = -INFINITY, L = 0.f;
      for (int sp_i = 0; sp_i < sp.active; ++sp_i) M = fmaxf(M, s_ml[sp_i * G + g].x);
      for (int sp_i = 0; sp_i < sp.active; ++sp_i) {
        const float w = exp2f(s_ml[sp_i * G + g].x - M);
        L += s_ml[sp_i * G + g].y * w;
        s_ml[sp_i * G + g].x = w;  // only this thread reads head g's entries
      }
      s_inv[g] = 1.f / L;
    }
    __syncthreads();
    for (int it = threadIdx.x; it < items; it += kThreads) {
      const int g = it / per_row, d = (it % per_row) * 8;
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll 8
      for (int sp_i = 0; sp_i < sp.active; ++sp_i) {
        const float w = s_ml[sp_i * G + g].x;
        const float4* src = reinterpret_cast<const float4*>(ws_o + ((part + sp_i) * G + g) * D + d);
        const float4 x = __ldcg(src), y = __ldcg(src + 1);
        add_weighted8(acc, x, y, w);
      }
      store_out8(a, D, G, t, kvh, g, d, acc, s_inv[g]);
    }
  }
}

}  // namespace
}  // namespace decode_attn
}  // namespace dcuda
