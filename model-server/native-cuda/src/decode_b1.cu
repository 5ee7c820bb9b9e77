// A one-token decode step's layers in one persistent kernel (see decode_b1.h for the phases and numerics).
#include "decode_b1.h"

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include "check.h"
#include "common/sm90.cuh"
#include "moe/topk_warp.cuh"

namespace dcuda {
namespace {

using dispatch::sm90::mbar_expect_tx;
using dispatch::sm90::mbar_fence_init;
using dispatch::sm90::mbar_init;
using dispatch::sm90::mbar_wait;
using dispatch::sm90::smem_addr;

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kStages = 3, kStageBytes = 8192;  // per warp: three rows of 2,048 bf16 pairs in flight
constexpr int kRingBytes = kWarps * kStages * kStageBytes;
constexpr int kMaxK = 16;
constexpr int kPartPad = 4;
constexpr int kTraceSegs = 10, kTraceLaunch = 150;  // attention partial: m, l, 2 spare, then D sums (16-byte aligned)

enum Phase : int { kQkv = 0, kO, kRouter, kGateUp, kDown, kPhases };
enum Counter : int { cQkv = 0, cAttn, cO, cLogits, cGateUp, cDown, kCounters = 8 };

// Host-derived launch constants.
struct Plan {
  int nc = 0, nw = 0;  // CTAs (one per SM), warps in the grid
  int splits = 1;      // context splits per query head (attention tasks: Hq * splits)
  int rd = 1, nd = 1;  // down rows per copy, down copies per expert (ceil(H / rd))
  int ld = 0, HqD = 0;
  int sleep = 0;       // ns between polls of a phase counter (DISPATCH_CUDA_PERSISTENT_SLEEP)
  int fence = 0;       // a proxy fence before each copy into a stage the warp has read (DISPATCH_CUDA_PERSISTENT_FENCE=1)
  int u_bytes = 0;     // the shared region reused across phases
  size_t smem = 0;
};

struct Misc {
  int ids[kMaxK];
  float wts[kMaxK];
  float red[kWarps];
  unsigned long long tacc[kTraceSegs], tprev, wacc[3];
  int tracing;
  int routed;  // the last layer whose routing this CTA has (expert copies of later layers wait)
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) t += red[i];
  __syncthreads();
  return t;
}

__device__ __forceinline__ float block_max(float v, float* red) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) t = fmaxf(t, red[i]);
  __syncthreads();
  return t;
}

// 8 bf16 products into two accumulators (half the dependent chain of one).
__device__ __forceinline__ void dot8_2(const uint4& a, const uint4& b, float& x, float& y) {
  const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
    x = fmaf(fa.x, fb.x, x);
    y = fmaf(fa.y, fb.y, y);
  }
}

// A lane's share of the dot of a bf16 row with a bf16 vector (n 16-byte vectors each), four accumulators.
__device__ __forceinline__ float lane_dot(const uint4* r, const uint4* v, int n, int lane) {
  float x0 = 0.f, y0 = 0.f, x1 = 0.f, y1 = 0.f;
  int i = lane;
#pragma unroll 1
  for (; i + 32 < n; i += 64) dot8_2(r[i], v[i], x0, y0), dot8_2(r[i + 32], v[i + 32], x1, y1);
  if (i < n) dot8_2(r[i], v[i], x0, y0);
  return (x0 + x1) + (y0 + y1);
}

// A warp's dot of a bf16 row (shared memory) with a bf16 vector (shared memory) of K values; every lane gets it.
__device__ __forceinline__ float row_dot(const void* row, const bf16* vec, int K, int lane) {
  return warp_sum(lane_dot(static_cast<const uint4*>(row), reinterpret_cast<const uint4*>(vec), K / 8, lane));
}

__device__ __forceinline__ float bf16_round(float v) { return __bfloat162float(__float2bfloat16(v)); }

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          smem_addr(dst)),
      "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every thread's global writes of the phase, then one release-add of the CTA's share.
__device__ __forceinline__ void phase_done(unsigned* c, unsigned n) {
  __syncthreads();
  if (threadIdx.x == 0 && n > 0) {
    __threadfence();
    atomicAdd(c, n);
  }
}

__device__ __forceinline__ void wait_count(const unsigned* c, unsigned target, int sleep_ns) {
  if (threadIdx.x == 0)
    while (load_acquire(c) < target)
      if (sleep_ns) __nanosleep(sleep_ns);
  __syncthreads();
}

// Units u = gw + nw * i < n of a phase: how many the CTA's warps (gw = 8 * CTA + 0..7) take.
__device__ __forceinline__ unsigned cta_units(int n, const Plan& p) {
  const int g0 = blockIdx.x * kWarps;
  return unsigned(kWarps * (n / p.nw) + min(max(n % p.nw - g0, 0), kWarps));
}

// A warp's place in its stream of weight copies: layer, phase, i-th unit of the phase (unit gw + nw * i).
struct Cursor {
  int l, ph, i;
};

__device__ __forceinline__ int phase_units(const DecodeB1Shape& s, const Plan& p, int ph) {
  switch (ph) {
    case kQkv: return p.ld;
    case kO: return s.H;
    case kRouter: return s.E;
    case kGateUp: return s.k * s.I;
    default: return s.k * p.nd;
  }
}

__device__ __forceinline__ void settle(Cursor& c, int gw, const DecodeB1Shape& s, const Plan& p) {
  while (c.l < s.L && gw + p.nw * c.i >= phase_units(s, p, c.ph)) {
    c.i = 0;
    if (++c.ph == kPhases) c.ph = 0, ++c.l;
  }
}

// Copies unit u of phase ph (layer ly) into a stage: one row range, or a gate|up pair (two rows 8 apart). One copy of
// this code in the kernel (not inlined into every place that fills a ring): the kernel's instruction footprint
// decides its speed as much as its loads do.
__device__ __noinline__ void issue_unit(const DecodeB1Layer* ly, int ph, int u, int H, int I, int HqD, int rd, int nd,
                                        const int* ids, unsigned char* dst, uint64_t* bar, uint64_t policy) {
  const void* src = nullptr;
  uint32_t bytes = 0;
  switch (ph) {
    case kQkv: src = ly->qkv + size_t(u) * H, bytes = H * 2; break;
    case kO: src = ly->o + size_t(u) * HqD, bytes = HqD * 2; break;
    case kRouter: src = ly->router + size_t(u) * H, bytes = H * 4; break;
    case kGateUp: {
      const int j = u / I, col = u % I, g = 16 * (col / 8) + col % 8;
      const bf16* base = ly->gate_up + size_t(ids[j]) * 2 * I * H;
      mbar_expect_tx(bar, H * 4);
      bulk_copy(dst, base + size_t(g) * H, H * 2, bar, policy);
      bulk_copy(dst + H * 2, base + size_t(g + 8) * H, H * 2, bar, policy);
      return;
    }
    default: {
      const int j = u / nd, r0 = (u % nd) * rd, nr = min(rd, H - r0);
      src = ly->down + (size_t(ids[j]) * H + r0) * I, bytes = nr * I * 2;
    }
  }
  mbar_expect_tx(bar, bytes);
  bulk_copy(dst, src, bytes, bar, policy);
}

// x (fp32, shared) -> rmsnorm(x) * w as bf16 (and fp32 when hf): the chain's rms_norm.
__device__ void norm_rows(const float* xs, int H, const float* __restrict__ w, float eps, bf16* hb, float* hf,
                          float* red) {
  float ss = 0.f;
  #pragma unroll 1
  for (int c = threadIdx.x; c < H; c += kThreads) ss += xs[c] * xs[c];
  const float inv = 1.f / sqrtf(block_sum(ss, red) / float(H) + eps);
  #pragma unroll 1
  for (int c = threadIdx.x; c < H; c += kThreads) {
    const float y = __ldg(w + c) * (xs[c] * inv);
    hb[c] = __float2bfloat16(y);
    if (hf) hf[c] = y;
  }
}

// x += bf16(sum_j w_j y_j): the routed experts' outputs of the previous layer (the chain's combine).
__device__ void combine(float* xs, const DecodeB1Args& a, const Misc& ms) {
  const int H = a.s.H, k = a.s.k;
  #pragma unroll 1
  for (int c8 = threadIdx.x; c8 < H / 8; c8 += kThreads) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    #pragma unroll 1
    for (int j = 0; j < k; ++j) {
      const uint4 v = __ldcg(reinterpret_cast<const uint4*>(a.y + size_t(j) * H) + c8);
      const __nv_bfloat162* pv = reinterpret_cast<const __nv_bfloat162*>(&v);
      const float w = ms.wts[j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(pv[i]);
        acc[2 * i] = fmaf(w, f.x, acc[2 * i]);
        acc[2 * i + 1] = fmaf(w, f.y, acc[2 * i + 1]);
      }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) xs[c8 * 8 + i] += bf16_round(acc[i]);
  }
}

// Attention scratch in the shared region U: q (scaled, fp32), the new K and V (bf16), the step's probabilities, the V
// partials [rpar][D], RoPE's cos / sin [D / 2] each and the q and k norm weights [D] each.
struct AttnSmem {
  float *q, *sc, *vp, *cs, *sn, *qw, *kw;
  bf16 *kn, *vn;
  __device__ AttnSmem(unsigned char* U, int D) {
    q = reinterpret_cast<float*>(U);
    kn = reinterpret_cast<bf16*>(q + D);
    vn = kn + D;
    sc = reinterpret_cast<float*>(vn + D);
    vp = sc + kThreads;
    cs = vp + (kThreads / (D / 8)) * D;
    sn = cs + D / 2;
    qw = sn + D / 2;
    kw = qw + D;
  }
};

struct AttnTask {
  int h, sp, kvh, pos, slot, begin, end;
  bool has_new, writer;
  __device__ AttnTask(const DecodeB1Args& a, const Plan& p, int task) {
    const int group = a.s.Hq / a.s.Hkv;
    h = task / p.splits, sp = task % p.splits, kvh = h / group;
    pos = a.pos[0], slot = a.slot[0];
    const int ctx = pos + 1, chunk = (ctx + p.splits - 1) / p.splits;
    begin = sp * chunk, end = min(ctx, begin + chunk);
    has_new = begin <= pos && pos < end;
    writer = has_new && h % group == 0 && slot >= 0;
  }
};

__device__ __forceinline__ const bf16* kv_row(const DecodeB1Args& a, const bf16* cache, int kvh, int q) {
  const int blk = a.table[q / a.B];
  return cache + (size_t(blk) * a.B + q % a.B) * (a.s.Hkv * a.s.D) + size_t(kvh) * a.s.D;
}

// Before the q|k|v rows are in: RoPE's angles and the norm weights into shared memory, and the task's first 256
// cached K / V rows pulled into L2 (the cache of earlier positions does not change during the step).
__device__ void attention_prologue(const DecodeB1Args& a, const Plan& p, const DecodeB1Layer& ly, int task,
                                   unsigned char* U) {
  const int D = a.s.D, tid = threadIdx.x;
  const AttnSmem sm(U, D);
  const AttnTask t(a, p, task);
  #pragma unroll 1
  for (int i = tid; i < D / 2; i += kThreads) {
    float sn, cs;
    sincosf(float(t.pos) * __ldg(a.inv_freq + i), &sn, &cs);
    sm.cs[i] = cs, sm.sn[i] = sn;
  }
  if (a.s.qk_norm == 1)
    for (int i = tid; i < D; i += kThreads) sm.qw[i] = __ldg(ly.q_norm + i), sm.kw[i] = __ldg(ly.k_norm + i);
  const int q = t.begin + tid;
  if (q < t.end && q != t.pos) {
    const bf16* kr = kv_row(a, ly.k_cache, t.kvh, q);
    const bf16* vr = kv_row(a, ly.v_cache, t.kvh, q);
    #pragma unroll 1
    for (int off = 0; off < D * 2; off += 128) {
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(reinterpret_cast<const char*>(kr) + off));
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(reinterpret_cast<const char*>(vr) + off));
    }
  }
}

// One attention task: query head h over split sp of the context (the new token's K/V from this step's q|k|v).
// Leaves m, l and the D unnormalized sums in attn_part[task]; the writer task puts the new K/V into the cache.
__device__ void attention_task(const DecodeB1Args& a, const Plan& p, const DecodeB1Layer& ly, int task,
                               unsigned char* U, float* red) {
  const DecodeB1Shape& s = a.s;
  const int D = s.D, half = D / 2, W = s.Hkv * D;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const AttnSmem sm(U, D);
  const AttnTask t(a, p, task);

  if (warp == 0 || (t.has_new && warp < 3)) {
    const float* src = a.qkv + (warp == 0 ? t.h * D : warp == 1 ? (s.Hq + t.kvh) * D : (s.Hq + s.Hkv + t.kvh) * D);
    if (warp == 2) {
      #pragma unroll 1
      for (int i = lane; i < D; i += 32) {
        const bf16 v = __float2bfloat16(__ldcg(src + i));
        sm.vn[i] = v;
        if (t.writer) ly.v_cache[size_t(t.slot) * W + size_t(t.kvh) * D + i] = v;
      }
    } else {
      const float* nw = s.qk_norm == 1 ? (warp == 0 ? sm.qw : sm.kw) : nullptr;
      float x0[2], x1[2], ss = 0.f;
      for (int j = 0; j < D / 64; ++j) {
        x0[j] = __ldcg(src + lane + 32 * j), x1[j] = __ldcg(src + lane + 32 * j + half);
        ss += x0[j] * x0[j] + x1[j] * x1[j];
      }
      const float f = nw ? 1.f / sqrtf(warp_sum(ss) / float(D) + a.eps) : 1.f;
      const float scale = 1.f / sqrtf(float(D));
      for (int j = 0; j < D / 64; ++j) {
        const int i = lane + 32 * j;
        float v0 = x0[j], v1 = x1[j];
        if (nw) v0 = nw[i] * (v0 * f), v1 = nw[i + half] * (v1 * f);
        const float cs = sm.cs[i], sn = sm.sn[i];
        const float r0 = v0 * cs - v1 * sn, r1 = v1 * cs + v0 * sn;
        if (warp == 0) {
          sm.q[i] = r0 * scale, sm.q[i + half] = r1 * scale;
        } else {
          const bf16 b0 = __float2bfloat16(r0), b1 = __float2bfloat16(r1);
          sm.kn[i] = b0, sm.kn[i + half] = b1;
          if (t.writer) {
            bf16* kc = ly.k_cache + size_t(t.slot) * W + size_t(t.kvh) * D;
            kc[i] = b0, kc[i + half] = b1;
          }
        }
      }
    }
  }
  __syncthreads();

  const int tpr = D / 8, rpar = kThreads / tpr;  // V: 8 dims per thread, rpar positions at once
  const int dg = tid % tpr, pr = tid / tpr;
  float m_run = -FLT_MAX, l_run = 0.f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  #pragma unroll 1
  for (int p0 = t.begin; p0 < t.end; p0 += kThreads) {
    const int n = min(kThreads, t.end - p0);
    float sv = -FLT_MAX;
    if (tid < n) {
      const int q = p0 + tid;
      const uint4* kr = reinterpret_cast<const uint4*>(q == t.pos ? sm.kn : kv_row(a, ly.k_cache, t.kvh, q));
      float d0 = 0.f;
#pragma unroll 2
      for (int v = 0; v < D / 8; ++v) {
        const uint4 kk = kr[v];
        const __nv_bfloat162* pk = reinterpret_cast<const __nv_bfloat162*>(&kk);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __bfloat1622float2(pk[i]);
          d0 = fmaf(sm.q[8 * v + 2 * i], f.x, d0);
          d0 = fmaf(sm.q[8 * v + 2 * i + 1], f.y, d0);
        }
      }
      sv = d0;
    }
    const float m_new = fmaxf(m_run, block_max(sv, red));
    const float corr = __expf(m_run - m_new);
    const float e = tid < n ? __expf(sv - m_new) : 0.f;
    sm.sc[tid] = e;
    l_run = l_run * corr + block_sum(e, red);  // its barrier also publishes sc
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] *= corr;
#pragma unroll 2
    for (int i = pr; i < n; i += rpar) {
      const int q = p0 + i;
      const uint4 vv = reinterpret_cast<const uint4*>(q == t.pos ? sm.vn : kv_row(a, ly.v_cache, t.kvh, q))[dg];
      const __nv_bfloat162* pv = reinterpret_cast<const __nv_bfloat162*>(&vv);
      const float w = sm.sc[i];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(pv[j]);
        acc[2 * j] = fmaf(w, f.x, acc[2 * j]);
        acc[2 * j + 1] = fmaf(w, f.y, acc[2 * j + 1]);
      }
    }
    m_run = m_new;
    __syncthreads();  // sc is rewritten by the next block of positions
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) sm.vp[pr * D + dg * 8 + i] = acc[i];
  __syncthreads();
  float* out = a.attn_part + size_t(task) * (D + kPartPad);
  if (tid < D) {
    float sum = 0.f;
    #pragma unroll 1
    for (int r = 0; r < rpar; ++r) sum += sm.vp[r * D + tid];
    out[kPartPad + tid] = sum;
  }
  if (tid == 0) out[0] = m_run, out[1] = l_run;
}

// Every CTA: the splits of every head merged into the attention output (bf16, shared memory); each thread's loads
// (every split's m, l and 8 sums) go out at once.
constexpr int kMaxSplits = 8;
__device__ void merge_attention(const DecodeB1Args& a, const Plan& p, bf16* attn) {
  const int D = a.s.D, stride = D + kPartPad;
  #pragma unroll 1
  for (int i = threadIdx.x * 8; i < p.HqD; i += kThreads * 8) {
    const int h = i / D, d = i % D;
    const float* base = a.attn_part + size_t(h) * p.splits * stride;
    float m[kMaxSplits], l[kMaxSplits];
    float4 v0[kMaxSplits], v1[kMaxSplits];
#pragma unroll
    for (int sp = 0; sp < kMaxSplits; ++sp) {
      if (sp >= p.splits) break;
      const float* part = base + sp * stride;
      const float2 ml = __ldcg(reinterpret_cast<const float2*>(part));
      m[sp] = ml.x, l[sp] = ml.y;
      v0[sp] = __ldcg(reinterpret_cast<const float4*>(part + kPartPad + d));
      v1[sp] = __ldcg(reinterpret_cast<const float4*>(part + kPartPad + d + 4));
    }
    float M = -FLT_MAX;
#pragma unroll
    for (int sp = 0; sp < kMaxSplits; ++sp)
      if (sp < p.splits) M = fmaxf(M, m[sp]);
    float den = 0.f, o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int sp = 0; sp < kMaxSplits; ++sp) {
      if (sp >= p.splits) break;
      const float f = __expf(m[sp] - M);
      den += f * l[sp];
      o[0] += f * v0[sp].x, o[1] += f * v0[sp].y, o[2] += f * v0[sp].z, o[3] += f * v0[sp].w;
      o[4] += f * v1[sp].x, o[5] += f * v1[sp].y, o[6] += f * v1[sp].z, o[7] += f * v1[sp].w;
    }
    const float inv = 1.f / den;
#pragma unroll
    for (int j = 0; j < 8; ++j) attn[i + j] = __float2bfloat16(o[j] * inv);
  }
}

template <int S>
__global__ void __launch_bounds__(kThreads, 1) decode_b1_kernel(DecodeB1Args a, Plan p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const DecodeB1Shape& s = a.s;
  const int H = s.H, E = s.E, k = s.k, I = s.I;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gw = blockIdx.x * kWarps + warp;
  unsigned char* wring = smem + size_t(warp) * kStages * kStageBytes;
  float* xs = reinterpret_cast<float*>(smem + kRingBytes);
  bf16* hb = reinterpret_cast<bf16*>(xs + H);
  unsigned char* U = reinterpret_cast<unsigned char*>(hb + H);
  uint64_t* bars = reinterpret_cast<uint64_t*>(U + p.u_bytes);
  uint64_t* bar = bars + warp * kStages;
  Misc& ms = *reinterpret_cast<Misc*>(bars + kWarps * kStages);
  volatile int* routed = &ms.routed;
  if (lane == 0)
    for (int i = 0; i < kStages; ++i) mbar_init(&bar[i], 1);
  if (tid == 0) {
    ms.routed = -1;
    ms.tracing = a.trace && (blockIdx.x == 0 || blockIdx.x == gridDim.x - 1) && load_acquire(a.trace) == kTraceLaunch;
    for (int i = 0; i < kTraceSegs; ++i) ms.tacc[i] = 0;
    ms.wacc[0] = ms.wacc[1] = ms.wacc[2] = 0;
    ms.tprev = global_ns();
  }
  mbar_fence_init();
  __syncthreads();
  const uint64_t policy = evict_first_policy();

  // The warp's copy stream: `ic` the next unit to copy, `cc` the next to consume; stage = count % kStages.
  Cursor ic{0, 0, 0}, cc{0, 0, 0};
  settle(ic, gw, s, p), settle(cc, gw, s, p);
  int issued = 0, consumed = 0;
  auto fill = [&]() {
    while (issued < consumed + kStages && ic.l < s.L && (ic.ph < kGateUp || *routed >= ic.l)) {
      if (lane == 0) {
        const int st = issued % kStages;
        // the warp's reads of the stage returned before the __syncwarp that preceded this issue
        if (p.fence) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        issue_unit(a.layers + ic.l, ic.ph, gw + p.nw * ic.i, H, I, p.HqD, p.rd, p.nd, ms.ids,
                   wring + st * kStageBytes, &bar[st], policy);
      }
      ++issued;
      ++ic.i;
      settle(ic, gw, s, p);
    }
    __syncwarp();
  };
  fill();
  const bool tracing = ms.tracing;
  auto mark = [&](int seg) {
    if (tracing && tid == 0) {
      const unsigned long long t = global_ns();
      ms.tacc[seg] += t - ms.tprev;
      ms.tprev = t;
    }
  };
  bf16* attn = reinterpret_cast<bf16*>(U);  // phase O's input
  float* hf = reinterpret_cast<float*>(U);  // the router's input (fp32)
  bf16* act = reinterpret_cast<bf16*>(U);   // the down rows' input

  // Every phase's code appears once (one loop over the phases, one consuming loop): the kernel's instruction
  // footprint is what held its first build back (a 270 KB kernel: each layer fetched its code again).
  for (int l = 0; l < s.L; ++l) {
    const DecodeB1Layer& ly = a.layers[l];
    unsigned* ctr = a.counters + l * kCounters;
    for (int ph = 0; ph < kPhases; ++ph) {
      // The CTA's own work before the phase's rows: their input vector.
      switch (ph) {
        case kQkv:
          if (l == 0) {
            #pragma unroll 1
            for (int c = tid; c < H; c += kThreads) xs[c] = __ldcg(a.x + c);
          } else {
            wait_count(ctr - kCounters + cDown, unsigned(k * p.nd), p.sleep);
            combine(xs, a, ms);
          }
          __syncthreads();
          norm_rows(xs, H, ly.input_norm, a.eps, hb, nullptr, ms.red);
          break;
        case kO: {
          const int tasks = s.Hq * p.splits;
          unsigned mine = 0;
          #pragma unroll 1
          for (int t = blockIdx.x; t < tasks; t += gridDim.x, ++mine) {
            __syncthreads();
            attention_prologue(a, p, ly, t, U);
            wait_count(ctr + cQkv, unsigned(p.ld), p.sleep);
            attention_task(a, p, ly, t, U, ms.red);
          }
          phase_done(ctr + cAttn, mine);
          wait_count(ctr + cAttn, unsigned(tasks), p.sleep);
          merge_attention(a, p, attn);
          break;
        }
        case kRouter:
          wait_count(ctr + cO, unsigned(H), p.sleep);
          #pragma unroll 1
          for (int c = tid; c < H; c += kThreads) xs[c] += __ldcg(a.o + c);
          __syncthreads();
          norm_rows(xs, H, ly.post_norm, a.eps, hb, hf, ms.red);
          break;
        case kGateUp: {
          wait_count(ctr + cLogits, unsigned(E), p.sleep);
          float* lg = reinterpret_cast<float*>(U);
          #pragma unroll 1
          for (int e = tid; e < E; e += kThreads) lg[e] = __ldcg(a.logits + e);
          __syncthreads();
          if (warp == 0) {
            int id = 0;
            float w = 0.f;
            dispatch::topk::topk_token<S, false>(lg, ly.router_bias, s.rc, lane, &id, &w);
            if (lane < k) ms.ids[lane] = id, ms.wts[lane] = w;
          }
          __syncthreads();
          if (tid == 0) ms.routed = l;
          __syncthreads();
          fill();
          break;
        }
        default:
          wait_count(ctr + cGateUp, unsigned(k * I), p.sleep);
          #pragma unroll 1
          for (int i = tid; i < k * I / 8; i += kThreads)
            reinterpret_cast<uint4*>(act)[i] = __ldcg(reinterpret_cast<const uint4*>(a.act) + i);
      }
      __syncthreads();
      mark(2 * ph);

      // The warp's rows of the phase, in copy order.
      const bool timed = tracing && tid == 0;
      while (cc.l == l && cc.ph == ph) {
        const int st = consumed % kStages;
        const unsigned long long t0 = timed ? global_ns() : 0;
        mbar_wait(&bar[st], (consumed / kStages) & 1);
        const unsigned long long t1 = timed ? global_ns() : 0;
        const unsigned char* row = wring + st * kStageBytes;
        const int u = gw + p.nw * cc.i;
        switch (ph) {
          case kQkv:
          case kO: {
            const float v = row_dot(row, ph == kQkv ? hb : attn, ph == kQkv ? H : p.HqD, lane);
            if (lane == 0) (ph == kQkv ? a.qkv : a.o)[u] = v;
            break;
          }
          case kRouter: {
            const float4* r = reinterpret_cast<const float4*>(row);
            const float4* hv = reinterpret_cast<const float4*>(hf);
            float acc = 0.f;
            #pragma unroll 2
            for (int i = lane; i < H / 4; i += 32) {
              const float4 w = r[i], x = hv[i];
              acc = fmaf(w.x, x.x, acc), acc = fmaf(w.y, x.y, acc), acc = fmaf(w.z, x.z, acc), acc = fmaf(w.w, x.w, acc);
            }
            acc = warp_sum(acc);
            if (lane == 0) a.logits[u] = acc;
            break;
          }
          case kGateUp: {
            const uint4* g = reinterpret_cast<const uint4*>(row);
            const uint4* up = reinterpret_cast<const uint4*>(row + H * 2);
            const uint4* v = reinterpret_cast<const uint4*>(hb);
            const float ag = warp_sum(lane_dot(g, v, H / 8, lane)), au = warp_sum(lane_dot(up, v, H / 8, lane));
            if (lane == 0) a.act[u] = __float2bfloat16(ag / (1.f + __expf(-ag)) * au);
            break;
          }
          default: {
            const int j = u / p.nd, r0 = (u % p.nd) * p.rd, nr = min(p.rd, H - r0);
            const uint4* av = reinterpret_cast<const uint4*>(act + size_t(j) * I);
            #pragma unroll 1
            for (int r = 0; r < nr; ++r) {
              const uint4* w = reinterpret_cast<const uint4*>(row + size_t(r) * I * 2);
              const float acc = warp_sum(lane_dot(w, av, I / 8, lane));
              if (lane == 0) a.y[size_t(j) * H + r0 + r] = __float2bfloat16(acc);
            }
          }
        }
        __syncwarp();
        const unsigned long long t2 = timed ? global_ns() : 0;
        ++consumed;
        ++cc.i;
        settle(cc, gw, s, p);
        fill();
        if (timed) ms.wacc[0] += t1 - t0, ms.wacc[1] += t2 - t1, ms.wacc[2] += global_ns() - t2;
      }
      static constexpr int kDone[kPhases] = {cQkv, cO, cLogits, cGateUp, cDown};
      phase_done(ctr + kDone[ph], cta_units(phase_units(s, p, ph), p));
      mark(2 * ph + 1);
    }
  }
  // segments: 0 combine + norm, 1 q|k|v, 2 attention + merge, 3 o, 4 residual + norm, 5 router, 6 top-k, 7 gate|up,
  // 8 activations, 9 down; then warp 0's data waits (10), row compute (11) and copy issue (12), us per layer
  if (tracing && tid == 0)
#pragma unroll 1
    for (int i = 0; i < kTraceSegs + 3; ++i)
      printf("[decode_b1] CTA %d seg %d: %.2f us\n", int(blockIdx.x), i,
             float(i < kTraceSegs ? ms.tacc[i] : ms.wacc[i - kTraceSegs]) / (1e3f * float(s.L)));
  if (a.trace && blockIdx.x == 0 && tid == 0) atomicAdd(a.trace, 1u);

  if (blockIdx.x == 0) {
    wait_count(a.counters + (s.L - 1) * kCounters + cDown, unsigned(k * p.nd), p.sleep);
    combine(xs, a, ms);
    __syncthreads();
    for (int c = tid; c < H; c += kThreads) a.x[c] = xs[c];
  }
}

using Kernel = void (*)(DecodeB1Args, Plan);
Kernel kernel_for(int E) {
  return E <= 128 ? decode_b1_kernel<4> : E <= 256 ? decode_b1_kernel<8> : decode_b1_kernel<16>;
}

int attention_scratch_bytes(int D) {
  const int tpr = D / 8, rpar = kThreads / tpr;
  return D * 4 + 2 * D * 2 + kThreads * 4 + rpar * D * 4 + D * 4 + 2 * D * 4;  // AttnSmem
}

Plan plan_for(const DecodeB1Shape& s, std::string* why) {
  Plan p;
  auto no = [&](const char* m) {
    if (why) *why = m;
    return Plan{};
  };
  if (s.L <= 0 || s.H <= 0 || s.Hq <= 0 || s.Hkv <= 0 || s.E <= 0 || s.k <= 0 || s.I <= 0) return no("empty shape");
  if (s.H % 8 != 0 || s.I % 8 != 0) return no("hidden and expert widths must be multiples of 8");
  if (s.H * 4 > kStageBytes) return no("hidden size above 2,048 (a router row or gate|up pair exceeds a stage)");
  if (s.Hq * s.D * 2 > kStageBytes) return no("Hq * head_dim above 4,096 (an o row exceeds a stage)");
  if (s.I * 2 > kStageBytes) return no("expert width above 4,096");
  if (s.D != 64 && s.D != 128) return no("head dim must be 64 or 128");
  if (s.Hq % s.Hkv != 0) return no("query heads must be a multiple of KV heads");
  if (s.k > kMaxK || s.k > s.E) return no("top-k above 16");
  if (s.E > 512) return no("more than 512 experts");
  if (s.qk_norm != 0 && s.qk_norm != 1) return no("only per-head q/k norm");
  if (s.rc.num_groups > 1) return no("grouped top-k");
  int dev = 0, sms = 0, optin = 0;
  DC_CUDA(cudaGetDevice(&dev));
  DC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  DC_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  p.nc = sms;
  p.nw = sms * kWarps;
  p.splits = std::max(1, std::min(kMaxSplits, sms / s.Hq));
  if (const char* v = std::getenv("DISPATCH_CUDA_PERSISTENT_FENCE")) p.fence = v[0] == '1';
  if (const char* v = std::getenv("DISPATCH_CUDA_PERSISTENT_SLEEP")) p.sleep = std::max(0, std::min(1000, std::atoi(v)));
  p.ld = (s.Hq + 2 * s.Hkv) * s.D;
  p.HqD = s.Hq * s.D;
  // down rows per copy: the fewest rows for the busiest warp (ties: bigger copies)
  const int rmax = kStageBytes / (s.I * 2);
  long best = -1;
  for (int r = 1; r <= rmax; ++r) {
    const long units = long(s.k) * ((s.H + r - 1) / r);
    const long cost = ((units + p.nw - 1) / p.nw) * r;
    if (best < 0 || cost <= best) best = cost, p.rd = r;
  }
  p.nd = (s.H + p.rd - 1) / p.rd;
  const int u = std::max({p.HqD * 2, s.k * s.I * 2, s.H * 4, s.E * 4, attention_scratch_bytes(s.D)});
  p.u_bytes = (u + 15) / 16 * 16;
  p.smem = size_t(kRingBytes) + size_t(s.H) * 6 + p.u_bytes + kWarps * kStages * 8 + sizeof(Misc);
  if (p.smem > size_t(optin)) return no("shared memory: the shape needs more than one SM has");
  return p;
}

}  // namespace

bool decode_b1_supported(const DecodeB1Shape& s, std::string* why) {
  const Plan p = plan_for(s, why);
  if (p.nc == 0) return false;
  const Kernel k = kernel_for(s.E);
  DC_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(p.smem)));
  int per_sm = 0;
  DC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, p.smem));
  if (per_sm < 1) {
    if (why) *why = "the kernel does not fit on an SM";
    return false;
  }
  return true;
}

size_t decode_b1_scratch_bytes(const DecodeB1Shape& s) {
  int dev = 0, sms = 0;
  DC_CUDA(cudaGetDevice(&dev));
  DC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int splits = std::max(1, std::min(kMaxSplits, sms / std::max(1, s.Hq)));
  const size_t part = size_t(s.Hq) * splits * (s.D + kPartPad) * 4;
  return (part + 255) / 256 * 256 + size_t(s.L) * kCounters * 4;
}

void decode_b1_bind_scratch(DecodeB1Args& a, void* scratch) {
  const size_t part = decode_b1_scratch_bytes(a.s) - size_t(a.s.L) * kCounters * 4;
  a.attn_part = static_cast<float*>(scratch);
  a.counters = reinterpret_cast<unsigned*>(static_cast<char*>(scratch) + part);
}

void decode_b1(const DecodeB1Args& a, cudaStream_t stream) {
  std::string why;
  const Plan p = plan_for(a.s, &why);
  DC_CHECK(p.nc > 0, "decode_b1: " + why);
  DC_CUDA(cudaMemsetAsync(a.counters, 0, size_t(a.s.L) * kCounters * 4, stream));
  const Kernel k = kernel_for(a.s.E);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(p.nc);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = p.smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1]{};
  attr[0].id = cudaLaunchAttributeCooperative;  // every CTA resident: the phases wait on each other
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  DC_CUDA(cudaLaunchKernelEx(&cfg, k, a, p));
}

}  // namespace dcuda
