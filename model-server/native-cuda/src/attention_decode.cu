// Flash-decoding paged attention for steps of few query tokens (attention_decode.cuh).
//
// Legend: T query tokens, Hkv KV heads, G = Hq / Hkv query heads per KV head (1..16), D head dim
// (multiple of 8, <= 256), B block size, S splits of one token's keys.
//
// One CTA per (split, KV head, token), 4 warps. The CTA serves all G query heads of its KV head,
// so each K/V row is read once per token (the per-head kernel read it G times). The token's keys
// [lo, pos] (lo from the sliding window) are cut into S contiguous splits when T * Hkv CTAs alone
// would not fill the GPU; a split's warps take 16-key blocks in turn.
//
// Per 16-key block a warp runs two m16n8k16 bf16 MMAs per 16 dims (fp32 accumulate):
//   S[16 x 16] = Q[16 x D] K^T   rows = query heads (G of 16 used), keys through the block table
//   O[16 x D] += P[16 x 16] V    P = exp2(S - m) (bf16 hi + lo for D <= 128), the S accumulators reused as the A operand
// Every lane loads whole 16-byte pieces (8 bf16) of K and V rows straight from global memory into
// MMA fragments, no shared memory:
//   - the dot product may sum the head dims in any order, so the 8 dims a lane loads are spread
//     over two k16 steps (Q's fragments built with the same order);
//   - V is needed transposed (pairs of keys per register): each loaded register is one 8x8 tile
//     fragment and `movmatrix.trans` transposes it in registers; the output dims come out
//     permuted the same way, so each lane ends holding 8 consecutive dims of its rows.
// Online softmax per query head in fp32 (log2 domain: q is pre-scaled by scale * log2(e)). For
// D <= 128, q and P enter the MMAs as two bf16 parts each (hi = bf16(x), lo = bf16(x - hi)), so
// about 16 bits of each survive and l sums the fp32 P; above 128 (registers) they are rounded to
// bf16 once and l sums the same rounded P that multiplies V. The warps merge their
// (m, l, O) through shared memory. With one split the CTA writes the bf16 output; otherwise it
// writes its (m, l, O) to the stream's workspace and the last CTA of the token's splits to arrive
// (atomic counter, reset by that CTA so graph replays find it at zero) merges them. The workspace
// is per (device, stream), fixed-size (2 x 2 SMs x G x D fp32 partials: 2.2 MB at G 8, D 128 on
// 132 SMs) and never freed (graphs captured on the stream keep its address).
// Cluster path (the default where the step splits at all): the nsplit <= 8 CTAs of one (token, KV
// head), 8 warps each, form a thread-block cluster; each leaves its (M, L, O) part in its own
// shared memory and, after a cluster barrier, the cluster's CTAs merge the parts through
// distributed shared memory and write the output: no workspace, no counter, no second pass over
// global memory, nothing to reset between graph replays. The split-K path above stays for steps
// the cluster path leaves (one split, a device that cannot co-schedule the clusters) and for
// DISPATCH_CUDA_ATTN_CLUSTER=0.
// Launched with programmatic dependent launch (pdl.h): a CTA reads pos, tok_seq and its first
// block-table entries (step metadata) and prefetches its warps' first K/V rows to L2 before
// griddepcontrol.wait, reads q and the caches after it; each warp prefetches its next block's
// rows to L2 while it computes the current one.
// attention_decode_qkv runs the kFused instantiations: qkv_post's work in each CTA's prologue
// (attention_decode_qkv.cuh).
#include <cooperative_groups.h>
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include "attention_decode.cuh"
#include "attention_decode_qkv.cuh"
#include "check.h"
#include "pdl.h"

namespace dcuda {
namespace {

constexpr int kWarps = 4;         // split-K kernel (global partials)
constexpr int kClusterWarps = 8;  // cluster kernel: one CTA of 8 warps per SM at NB 4 (232 registers)
constexpr int kMaxCluster = 8;    // portable thread-block cluster size
constexpr int kBlockKeys = 16;    // keys per warp step
constexpr int kMaxSplits = 64;
constexpr int kMaxGroup = 16;  // MMA rows
constexpr int kMaxDim = 256;
constexpr int kMergeChunk = 8;  // up to this many splits, the merging CTA loads all partials in one go
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Thread (r = lane / 4, c = lane % 4) holds x = M[r][2c .. 2c+1] of an 8x8 bf16 matrix M; returns
// M^T[r][2c .. 2c+1] = (M[2c][r], M[2c+1][r]).
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float lo_f(uint32_t x) { return __uint_as_float(x << 16); }
__device__ __forceinline__ float hi_f(uint32_t x) { return __uint_as_float(x & 0xffff0000u); }

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The warps' merge: with a shared slab per warp (W x G x D floats) when that fits in the default
// 48 KB of shared memory with the rest (4 warps: G x D <= 2048 floats, G 16 at D 128, G 8 at D 256;
// 8 warps of the cluster kernel: G x D <= 1492, G 8 at D 128), so all warps write at once; else
// one shared [G, D] that the warps add to in turn.
template <int W, bool kCluster, bool kFused = false>
__host__ __device__ __forceinline__ bool merge_slabs(int G, int D) {
  // split-K: s_ml, s_inv, s_last (and spare); cluster: s_cml, s_last (and spare); kFused: s_new, s_raw
  constexpr int kStatic =
      (kCluster ? kMaxGroup * 8 + 256 : kMaxSplits * kMaxGroup * 8 + 256) + (kFused ? 2 * kMaxDim * (2 + 4) : 0);
  return (2 * W * 16 + W * G * D) * 4 + kStatic <= 48 * 1024;
}

// The key range [lo, pos] of a token and the part of it that split `split` of `nsplit` covers.
struct Split {
  int lo, hi, active;  // keys [lo, hi]; active = splits that hold keys (hi < lo when this one holds none)
};
// A split holds 16 W keys at least (a block for each of its W warps).
template <int W>
__device__ __forceinline__ Split split_of(const AttentionArgs& a, int t, int split, int nsplit) {
  const int pos = a.pos[t];
  const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  const int len = pos - first + 1;
  int chunk = (len + nsplit - 1) / nsplit;
  chunk = max(kBlockKeys * W, (chunk + kBlockKeys - 1) / kBlockKeys * kBlockKeys);
  Split s;
  s.active = (len + chunk - 1) / chunk;
  s.lo = first + split * chunk;
  s.hi = min(pos, s.lo + chunk - 1);
  return s;
}

// The cluster kernel's merge: every CTA of the (token, KV head) left its part in its shared
// memory, O relative to its M over slab 0 of s_o [G][D] and (M, L) per head in s_cml. The items
// (head g, 8 dims) are dealt round-robin to the cluster's CTAs; each reads its items' parts from
// the `active` CTAs that hold keys through distributed shared memory and writes the output:
//   M = max_s M_s, w_s = 2^(M_s - M), out = sum_s w_s O_s / sum_s w_s L_s (sums in split order).
// The first barrier makes every part visible cluster-wide, the second keeps each CTA's shared
// memory alive until the cluster's reads of it are done.
template <int W>
__device__ __forceinline__ void cluster_merge(const AttentionArgs& a, int G, int active, float* s_o, float2* s_cml,
                                              int t, int kvh, int rank) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int nranks = int(cluster.num_blocks());
  const int D = a.D, per_row = D / 8, items = G * per_row;
  cluster.sync();
  for (int it = threadIdx.x * nranks + rank; it < items; it += W * 32 * nranks) {
    const int g = it / per_row, d = (it % per_row) * 8;
    float2 ml[kMaxCluster];
    float4 xa[kMaxCluster], xb[kMaxCluster];
#pragma unroll
    for (int u = 0; u < kMaxCluster; ++u) {
      if (u < active) {  // all loads in flight together
        ml[u] = cluster.map_shared_rank(s_cml, u)[g];
        const float4* src = reinterpret_cast<const float4*>(cluster.map_shared_rank(s_o, u) + size_t(g) * D + d);
        xa[u] = src[0], xb[u] = src[1];
      }
    }
    float M = -INFINITY;
#pragma unroll
    for (int u = 0; u < kMaxCluster; ++u)
      if (u < active) M = fmaxf(M, ml[u].x);
    float L = 0.f, acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int u = 0; u < kMaxCluster; ++u) {
      if (u < active) {
        const float w = ml[u].x == -INFINITY ? 0.f : exp2f(ml[u].x - M);  // split 0 holds keys: M finite
        L += ml[u].y * w;
        const float4 x = xa[u], y = xb[u];
        acc[0] += x.x * w, acc[1] += x.y * w, acc[2] += x.z * w, acc[3] += x.w * w;
        acc[4] += y.x * w, acc[5] += y.y * w, acc[6] += y.z * w, acc[7] += y.w * w;
      }
    }
    const float inv = 1.f / L;
    uint4 v;
    v.x = pack_bf16(acc[0] * inv, acc[1] * inv), v.y = pack_bf16(acc[2] * inv, acc[3] * inv);
    v.z = pack_bf16(acc[4] * inv, acc[5] * inv), v.w = pack_bf16(acc[6] * inv, acc[7] * inv);
    *reinterpret_cast<uint4*>(a.out + size_t(t) * a.Hq * D + (size_t(kvh) * G + g) * D + d) = v;
  }
  cluster.sync();
}

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
    // the last of the token's active splits to arrive merges all of them
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
    // M = max m_s, w_s = 2^(m_s - M), L = sum l_s w_s, O = sum w_s O_s / L, sums in split order.
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
          const float4 x = xa[u], y = xb[u];
          acc[0] += x.x * w, acc[1] += x.y * w, acc[2] += x.z * w, acc[3] += x.w * w;
          acc[4] += y.x * w, acc[5] += y.y * w, acc[6] += y.z * w, acc[7] += y.w * w;
        }
        const float inv = 1.f / L;
        uint4 v;
        v.x = pack_bf16(acc[0] * inv, acc[1] * inv), v.y = pack_bf16(acc[2] * inv, acc[3] * inv);
        v.z = pack_bf16(acc[4] * inv, acc[5] * inv), v.w = pack_bf16(acc[6] * inv, acc[7] * inv);
        *reinterpret_cast<uint4*>(a.out + size_t(t) * a.Hq * D + (size_t(kvh) * G + g) * D + d) = v;
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
        acc[0] += x.x * w, acc[1] += x.y * w, acc[2] += x.z * w, acc[3] += x.w * w;
        acc[4] += y.x * w, acc[5] += y.y * w, acc[6] += y.z * w, acc[7] += y.w * w;
      }
      const float inv = s_inv[g];
      uint4 v;
      v.x = pack_bf16(acc[0] * inv, acc[1] * inv), v.y = pack_bf16(acc[2] * inv, acc[3] * inv);
      v.z = pack_bf16(acc[4] * inv, acc[5] * inv), v.w = pack_bf16(acc[6] * inv, acc[7] * inv);
      *reinterpret_cast<uint4*>(a.out + size_t(t) * a.Hq * D + (size_t(kvh) * G + g) * D + d) = v;
    }
  }
}

// Split partials of one stream: (m, l) and O for up to `rows` (token, KV head, split) triples of
// `group_dim` = G * D floats each, and one arrival counter per (token, KV head) of a split step.
struct Workspace {
  float* o = nullptr;
  float2* ml = nullptr;
  int* counters = nullptr;
  int rows = 0, counter_cap = 0, group_dim = 0, group = 0;
  int target_ctas = 0;  // CTAs that fill the device (2 per SM)
};

std::mutex g_mu;
std::map<std::pair<int, cudaStream_t>, Workspace> g_workspaces;
std::map<int, int> g_target_ctas;  // per device: 2 CTAs per SM (queried once, not per stream)
// Buffers a bigger head shape replaced. Never freed: a captured graph may still point at them.
std::vector<void*> g_retired;

// The stream's workspace, grown (outside a capture only) to hold G x D partials. Split steps need
// fewer than 2 * target_ctas rows: S = round(target / (T * Hkv)) > 1 only when
// T * Hkv <= 2/3 target_ctas, and then T * Hkv * S <= target_ctas + T * Hkv / 2.
Workspace& workspace_for(cudaStream_t s, int G, int D, bool need_partials) {
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(g_mu);
  Workspace& w = g_workspaces[{dev, s}];
  if (w.target_ctas == 0) {
    int& target = g_target_ctas[dev];
    if (target == 0) {
      int sms = 0;
      DC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
      target = 2 * (sms > 0 ? sms : 1);
    }
    w.target_ctas = target;
  }
  if (!need_partials || (w.group_dim >= G * D && w.group >= G)) return w;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  DC_CUDA(cudaStreamIsCapturing(s, &status));
  DC_CHECK(status == cudaStreamCaptureStatusNone,
           "decode attention: the split workspace for this head shape must be allocated, but the stream is "
           "capturing a CUDA graph; run one step of this shape eagerly before capturing");
  if (w.o) g_retired.insert(g_retired.end(), {w.o, w.ml, w.counters});
  const int rows = 2 * w.target_ctas;
  const int group_dim = std::max(G * D, w.group_dim), group = std::max(G, w.group);
  float* o = nullptr;
  float2* ml = nullptr;
  int* counters = nullptr;
  DC_CUDA(cudaMalloc(&o, size_t(rows) * group_dim * sizeof(float)));
  DC_CUDA(cudaMalloc(&ml, size_t(rows) * group * sizeof(float2)));
  DC_CUDA(cudaMalloc(&counters, size_t(w.target_ctas) * sizeof(int)));
  DC_CUDA(cudaMemsetAsync(counters, 0, size_t(w.target_ctas) * sizeof(int), s));
  w.o = o, w.ml = ml, w.counters = counters;
  w.rows = rows, w.counter_cap = w.target_ctas, w.group_dim = group_dim, w.group = group;
  return w;
}

template <int NB, bool kFused>
void launch(const AttentionArgs& a, const QkvPostArgs& p, int G, int nsplit, const Workspace& w, cudaStream_t s) {
  const size_t smem =
      (size_t(2) * kWarps * 16 + size_t(merge_slabs<kWarps, false, kFused>(G, a.D) ? kWarps : 1) * G * a.D) *
      sizeof(float);
  launch_k(sm90_bf16_attention_decode_paged<NB, kWarps, false, kFused>, dim3(nsplit, a.Hkv, a.T), dim3(kWarps * 32),
           smem, s, a, G, w.o, w.ml, w.counters, p);
}

// DISPATCH_CUDA_ATTN_CLUSTER=0: the split-K path for every step (A/B against the cluster path).
bool cluster_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_ATTN_CLUSTER");
    return !(v != nullptr && v[0] == '0');
  }();
  return on;
}

// CTAs that fill the device with the split-K kernel (2 per SM), from the stream's workspace record.
int target_ctas(cudaStream_t s, int G, int D) { return workspace_for(s, G, D, false).target_ctas; }

// The cluster kernel's launch for nsplit CTAs per (token, KV head) (no PDL attribute yet).
template <int NB, bool kFused>
struct ClusterLaunch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attrs[2]{};
  ClusterLaunch(const AttentionArgs& a, int G, int nsplit, cudaStream_t s) {
    cfg.gridDim = dim3(nsplit, a.Hkv, a.T);
    cfg.blockDim = dim3(kClusterWarps * 32);
    cfg.dynamicSmemBytes = (size_t(2) * kClusterWarps * 16 +
                            size_t(merge_slabs<kClusterWarps, true, kFused>(G, a.D) ? kClusterWarps : 1) * G * a.D) *
                           sizeof(float);
    cfg.stream = s;
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = unsigned(nsplit), attrs[0].val.clusterDim.y = 1, attrs[0].val.clusterDim.z = 1;
    cfg.attrs = attrs;
    cfg.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;  // cfg points into attrs
  static constexpr auto kernel = sm90_bf16_attention_decode_paged<NB, kClusterWarps, true, kFused>;
};

// Clusters of this launch the device runs at once (a cluster needs nsplit SMs of one GPC free
// together, so fewer than SMs / nsplit where a GPC's SMs do not divide evenly), asked once per
// (device, kernel, cluster size, shared memory); 0 when it cannot run one.
template <int NB, bool kFused>
int cluster_capacity(const ClusterLaunch<NB, kFused>& l, int nsplit) {
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  static std::mutex mu;
  static std::map<std::tuple<int, int, size_t>, int> known;  // per instantiation (kFused: its own)
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, nsplit, l.cfg.dynamicSmemBytes);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, ClusterLaunch<NB, kFused>::kernel, &l.cfg) != cudaSuccess) {
    cudaGetLastError();  // not fatal and not remembered: the split-K path runs this time
    return 0;
  }
  return known[key] = clusters;
}

// The cluster size for this step: S = round(SMs / (T * Hkv)) (one 8-warp CTA per SM, as many
// warps as the split-K kernel's 2 x 4), at most 8, lowered until all T * Hkv clusters run at once
// (a second wave would double the latency); 0 (split-K path) below 2.
template <int NB, bool kFused>
int cluster_splits(const AttentionArgs& a, cudaStream_t s) {
  const int G = a.Hq / a.Hkv, pairs = a.T * a.Hkv;
  const int sms = target_ctas(s, G, a.D) / 2;
  for (int nsplit = std::min(kMaxCluster, (sms + pairs / 2) / pairs); nsplit > 1; --nsplit) {
    if (cluster_capacity<NB, kFused>(ClusterLaunch<NB, kFused>(a, G, nsplit, s), nsplit) >= pairs) return nsplit;
  }
  return 0;
}

// One cluster of nsplit CTAs per (token, KV head), with PDL as launch_k (pdl.h).
template <int NB, bool kFused>
void launch_cluster(const AttentionArgs& a, const QkvPostArgs& p, int G, int nsplit, cudaStream_t s) {
  ClusterLaunch<NB, kFused> l(a, G, nsplit, s);
  l.attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  l.attrs[1].val.programmaticStreamSerializationAllowed = 1;
  l.cfg.numAttrs = pdl_enabled() && s != nullptr ? 2 : 1;  // the step's own stream only
  DC_CUDA(cudaLaunchKernelEx(&l.cfg, ClusterLaunch<NB, kFused>::kernel, a, G, static_cast<float*>(nullptr),
                             static_cast<float2*>(nullptr), static_cast<int*>(nullptr), p));
}

// f(std::integral_constant<int, NB>{}) for NB = ceil(D / 32).
template <typename F>
auto with_nb(int D, F&& f) {
  switch ((D + 31) / 32) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

// attention_decode and attention_decode_qkv: the cluster path where the step splits its keys,
// else split-K. kFused: p as attention_decode_qkv takes it; else p is unused.
template <bool kFused>
void run_decode(const AttentionArgs& a, const QkvPostArgs& p, cudaStream_t s, DecodeMerge merge) {
  if (a.T == 0) return;
  const int G = a.Hq / a.Hkv;
  if (merge == DecodeMerge::kCluster || (merge == DecodeMerge::kAuto && cluster_enabled())) {
    const bool done = with_nb(a.D, [&](auto nb) {
      constexpr int NB = decltype(nb)::value;
      const int nsplit = cluster_splits<NB, kFused>(a, s);
      if (nsplit < 2) return false;
      launch_cluster<NB, kFused>(a, p, G, nsplit, s);
      return true;
    });
    if (done) {
      DC_LAUNCHED();
      return;
    }
  }
  const int pairs = a.T * a.Hkv;
  const int target = target_ctas(s, G, a.D);
  // about target CTAs: S = round(target / (T * Hkv)), so 256 pairs on 264 slots run unsplit
  const int nsplit = std::min(kMaxSplits, std::max(1, (target + pairs / 2) / pairs));
  const Workspace& w = workspace_for(s, G, a.D, nsplit > 1);
  if (nsplit > 1) {
    DC_CHECK(size_t(pairs) * nsplit <= size_t(w.rows) && pairs <= w.counter_cap, "decode attention: workspace too small");
  }
  with_nb(a.D, [&](auto nb) { launch<decltype(nb)::value, kFused>(a, p, G, nsplit, w, s); });
  DC_LAUNCHED();
}

}  // namespace

bool attention_decode_supported(const AttentionArgs& a) {
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return a.T >= 0 && a.T <= kAttentionDecodeMaxTokens && a.D > 0 && a.D % 8 == 0 && a.D <= kMaxDim && a.Hkv > 0 &&
         a.Hq % a.Hkv == 0 && a.Hq / a.Hkv <= kMaxGroup && a.B > 0 && aligned(a.k_cache) && aligned(a.v_cache) &&
         aligned(a.out) && aligned(a.q) && a.ldq % 4 == 0;
}

bool attention_decode_qkv_supported(const AttentionArgs& a, const QkvPostArgs& p) {
  return attention_decode_supported(a) && p.qkv != nullptr && (reinterpret_cast<uintptr_t>(p.qkv) & 15) == 0 &&
         p.T == a.T && p.Hq == a.Hq && p.Hkv == a.Hkv &&
         p.D == a.D && (p.qk_norm == 0 || (p.qk_norm == 1 && p.q_norm && p.k_norm)) && p.pos == a.pos &&
         p.inv_freq != nullptr && p.slots != nullptr && p.k_cache == a.k_cache && p.v_cache == a.v_cache;
}

int attention_decode_cluster_size(const AttentionArgs& a, cudaStream_t s) {
  if (a.T <= 0 || !attention_decode_supported(a)) return 0;
  return with_nb(a.D, [&](auto nb) { return cluster_splits<decltype(nb)::value, false>(a, s); });
}

void attention_decode(const AttentionArgs& a, cudaStream_t s, DecodeMerge merge) {
  DC_CHECK(attention_decode_supported(a), "decode attention: shape not supported (T <= 64, D % 8 == 0, D <= 256, "
                                          "Hq / Hkv <= 16, 16-byte aligned q, caches and output, ldq % 4 == 0)");
  run_decode<false>(a, QkvPostArgs{}, s, merge);
}

void attention_decode_qkv(const AttentionArgs& a, const QkvPostArgs& p, cudaStream_t s, DecodeMerge merge) {
  DC_CHECK(attention_decode_qkv_supported(a, p),
           "decode attention with q/k norm + RoPE + KV write: shape not supported (attention_decode's shapes, "
           "qk_norm 0 or 1, p and a on the same step, pos and caches)");
  run_decode<true>(a, p, s, merge);
}

}  // namespace dcuda
