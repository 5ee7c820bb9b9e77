// One-token MoE block in one persistent kernel (see moe_block.h for the phases and numerics).
#include "moe_block.h"

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include "check.h"
#include "common/sm90.cuh"
#include "pdl.h"

namespace dcuda {
namespace {

using dispatch::sm90::mbar_expect_tx;
using dispatch::sm90::mbar_fence_init;
using dispatch::sm90::mbar_init;
using dispatch::sm90::mbar_wait;
using dispatch::sm90::smem_addr;

constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int kMaxStages = 64;
constexpr int kStageBytes = 48 * 1024;  // 12 rows of a 2048-wide gate|up; larger copies ran faster (2026-12-02)
constexpr int kMaxChunks = 256;
constexpr int kMaxChunkRows = 64;  // rows of one chunk (bounds the reduction scratch)
constexpr int kMaxRows = 64;       // rows of H per CTA
constexpr int kMaxE = 256, kMaxK = 16;
constexpr int kPartStride = 4;  // part row: E logits, then ss1, ss2 (E + 4 keeps float4 alignment)

enum ChunkKind : uint8_t { kO = 0, kRouter = 1, kGateUp = 2, kDown = 3 };
enum Flags : int { kDownLate = 1 };

struct Chunk {
  const char* src;
  uint32_t bytes;
  int32_t row0;  // first row: of the CTA's rows of H (o, router, down) or of expert j's 2I rows (gate|up)
  uint16_t nrows;
  uint8_t kind, j;
};

struct Static {
  uint64_t full[kMaxStages];
  Chunk chunks[kMaxChunks];
  float red[2][kMaxChunkRows > kWarps ? kMaxChunkRows : kWarps];
  float xold[kMaxRows], xrow[kMaxRows], acc[kMaxRows], nw[kMaxRows], nn[kMaxRows], ob[kMaxRows];
  float plog[kMaxE], logits[kMaxE + kPartStride + kMaxE];  // logits, ss1, then the selection scores
  float wts[kMaxK];
  int ids[kMaxK];
  int n_a, n_d0, n_all;  // phase A's chunks, the first down chunk, all
  float rms2;
  unsigned long long t[14];
};

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
    acc = fmaf(fa.x, fb.x, acc);
    acc = fmaf(fa.y, fb.y, acc);
  }
  return acc;
}

__device__ __forceinline__ float bf16_round(float v) { return __bfloat162float(__float2bfloat16(v)); }

// All CTAs of the grid meet here (they are all resident: one per SM). The arrival word's top bit flips once every
// CTA has added (CTA 0 adds 2^31 - (G - 1), the others 1), so the word needs no reset between barriers or launches.
__device__ __forceinline__ void grid_barrier(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    __threadfence();
    const unsigned old = atomicAdd(bar, add);
    unsigned cur;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(cur) : "l"(bar) : "memory");
    } while (((cur ^ old) & 0x80000000u) == 0);
    __threadfence();
  }
  __syncthreads();
}

__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  mbar_expect_tx(bar, bytes);
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          smem_addr(dst)),
      "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// Weights are read once per step: evict-first in L2, so the activations, partials and this kernel's own
// instructions stay there
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

// Appends chunks of at most `per` rows covering rows [0, n) of a row-major source (thread 0 only).
__device__ void add_rows(Static& st, int& n, uint8_t kind, uint8_t j, const char* base, uint32_t row_bytes, int row0,
                         int nrows, int per) {
  for (int r = 0; r < nrows; r += per) {
    const int m = nrows - r < per ? nrows - r : per;
    Chunk& c = st.chunks[n++];
    c.src = base + size_t(r) * row_bytes;
    c.bytes = uint32_t(m) * row_bytes;
    c.row0 = row0 + r;
    c.nrows = uint16_t(m);
    c.kind = kind;
    c.j = j;
  }
}

__device__ __forceinline__ int rows_per_chunk(int stage_bytes, int row_bytes) {
  const int r = stage_bytes / row_bytes;
  return r < kMaxChunkRows ? r : kMaxChunkRows;
}

// Timing probe: launch 200 (counted by CTA 0) prints CTA 0's and the last CTA's phase times in microseconds.
__device__ void trace_report(const MoeBlockArgs& a, Static& st, int G) {
  if (threadIdx.x != 0) return;
  st.t[9] = global_ns();
  __shared__ unsigned launch;
  if (blockIdx.x == 0) launch = atomicAdd(a.trace, 1u);
  else launch = *reinterpret_cast<volatile unsigned*>(a.trace);
  if (launch != 200 || (blockIdx.x != 0 && int(blockIdx.x) != G - 1)) return;
  const double t0 = double(st.t[0]);
  printf("[moe_block trace] cta %d: wait %.2f o+router %.2f B1 %.2f topk+h %.2f gate_up %.2f B3 %.2f act %.2f down %.2f "
         "tail %.2f total %.2f us\n",
         int(blockIdx.x), (st.t[1] - t0) / 1e3, (st.t[2] - double(st.t[1])) / 1e3, (st.t[3] - double(st.t[2])) / 1e3,
         (st.t[4] - double(st.t[3])) / 1e3, (st.t[5] - double(st.t[4])) / 1e3, (st.t[6] - double(st.t[5])) / 1e3,
         (st.t[7] - double(st.t[6])) / 1e3, (st.t[8] - double(st.t[7])) / 1e3, (st.t[9] - double(st.t[8])) / 1e3,
         (st.t[9] - t0) / 1e3);
  printf("[moe_block trace] cta %d: topk+h = partials %.2f topk %.2f patch+issue %.2f h %.2f us\n", int(blockIdx.x),
         (st.t[10] - double(st.t[3])) / 1e3, (st.t[11] - double(st.t[10])) / 1e3, (st.t[12] - double(st.t[11])) / 1e3,
         (st.t[4] - double(st.t[12])) / 1e3);
}

// Flags: kDownLate requests the down rows only after the activations are formed (their loads then do not queue
// behind the down rows).
__global__ void __launch_bounds__(kThreads, 1) moe_block_kernel(MoeBlockArgs a, int NS, int SB, int flags) {
  const bool down_late = flags & kDownLate;
  extern __shared__ __align__(128) unsigned char dyn[];
  __shared__ Static st;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int G = gridDim.x, cta = blockIdx.x;
  const int H = a.H, E = a.E, K = a.top_k, I = a.I, Ko = a.Ko, EP = E + kPartStride;
  const int h0 = int(int64_t(cta) * H / G), nh = int(int64_t(cta + 1) * H / G) - h0;
  unsigned char* ring = dyn;
  const int vec_elems = Ko > K * I ? Ko : K * I;
  bf16* vec = reinterpret_cast<bf16*>(dyn + size_t(NS) * SB);  // attention output, then the activations
  bf16* hbv = vec + vec_elems;                                  // normed h (post-attention)

  if (a.trace && tid == 0) st.t[0] = global_ns();
  // Before the wait: weights only (nothing writes them). The o rows and the router's rows of H go in flight now.
  // Chunk q lands in stage q % NS and completes phase (q / NS) & 1 of its barrier.
  const uint64_t policy = evict_first_policy();
  auto issue = [&](int q) {  // thread 0
    const Chunk& c = st.chunks[q];
    bulk_load(ring + size_t(q % NS) * SB, c.src, c.bytes, &st.full[q % NS], policy);
  };
  if (tid == 0) {
    for (int s = 0; s < NS; ++s) mbar_init(&st.full[s], 1);
    mbar_fence_init();
    int n = 0;
    add_rows(st, n, kO, 0, reinterpret_cast<const char*>(a.wo + size_t(h0) * Ko), uint32_t(Ko) * 2, 0, nh,
             rows_per_chunk(SB, Ko * 2));
    add_rows(st, n, kRouter, 0, reinterpret_cast<const char*>(a.router_t + size_t(h0) * E), uint32_t(E) * 4, 0, nh,
             rows_per_chunk(SB, E * 4));
    st.n_a = n;
    // Phase B's chunks as if every chosen expert were expert 0; the routing adds each expert's offset (phase 2).
    const int rows = K * 2 * I;
    int r = int(int64_t(cta) * rows / G);
    const int r1 = int(int64_t(cta + 1) * rows / G);
    while (r < r1) {
      const int j = r / (2 * I), within = r % (2 * I);
      const int m = min(r1 - r, 2 * I - within);
      add_rows(st, n, kGateUp, uint8_t(j), reinterpret_cast<const char*>(a.gate_up + size_t(within) * H),
               uint32_t(H) * 2, within, m, rows_per_chunk(SB, H * 2));
      r += m;
    }
    st.n_d0 = n;
    for (int j = 0; j < K; ++j)
      add_rows(st, n, kDown, uint8_t(j), reinterpret_cast<const char*>(a.down + size_t(h0) * I), uint32_t(I) * 2, 0,
               nh, rows_per_chunk(SB, I * 2));
    st.n_all = n;
  }
  __syncthreads();
  // issued: chunks requested so far; limit: the first that may not be yet (phase B's wait for the routing to patch
  // them in); both the same in every thread. request(end) asks (on thread 0) for every chunk below `limit` and
  // `end`: with `end` = the first chunk not yet consumed + NS, each lands in a free stage.
  int issued = 0, limit = st.n_a;
  auto request = [&](int end) {
    for (; issued < limit && issued < end; ++issued)
      if (tid == 0) issue(issued);
  };
  request(NS);
  for (int r = tid; r < nh; r += kThreads) {
    st.nw[r] = a.post_norm[h0 + r];
    st.nn[r] = a.next_norm ? a.next_norm[h0 + r] : 0.f;
    st.ob[r] = a.o_bias ? a.o_bias[h0 + r] : 0.f;
    st.acc[r] = 0.f;
  }
  for (int e = tid; e < E; e += kThreads) st.plog[e] = 0.f;
  pdl_wait();
  if (a.trace && tid == 0) st.t[1] = global_ns();
  {
    const uint4* src = reinterpret_cast<const uint4*>(a.attn);
    uint4* dst = reinterpret_cast<uint4*>(vec);
    for (int i = tid; i < Ko / 8; i += kThreads) dst[i] = __ldcg(src + i);
    for (int r = tid; r < nh; r += kThreads) st.xold[r] = __ldcg(a.x + h0 + r);
  }
  __syncthreads();

  // Consumes chunk q (every thread); `finish(ch, r, v)` runs on thread r < nrows with row r's dot product.
  auto dot_chunk = [&](int q, const bf16* vin, auto finish) {
    const Chunk ch = st.chunks[q];
    const int s = q % NS;
    mbar_wait(&st.full[s], uint32_t(q / NS) & 1u);
    const uint4* w = reinterpret_cast<const uint4*>(ring + size_t(s) * SB);
    const uint4* v = reinterpret_cast<const uint4*>(vin);
    const int nr = ch.nrows, V = int(ch.bytes / ch.nrows) / 16;
    const int S = nr >= kWarps ? 1 : kWarps / nr, units = nr * S;
    float* red = st.red[q & 1];
    for (int u = warp; u < units; u += kWarps) {
      const int r = u / S, p = u % S;
      const int v0 = p * V / S, v1 = (p + 1) * V / S;
      float acc = 0.f;
      for (int i = v0 + lane; i < v1; i += 32) acc = dot8(w[size_t(r) * V + i], v[i], acc);
      acc = warp_sum(acc);
      if (lane == 0) red[u] = acc;
    }
    __syncthreads();  // stage s read by every warp; red complete
    request(q + 1 + NS);
    if (tid < nr) {
      float d = 0.f;
      for (int p = 0; p < S; ++p) d += red[tid * S + p];
      finish(ch, tid, d);
    }
  };

  // Phase 1: o rows (x_new = x + o), then the router's partial logits over these rows.
  for (int q = 0; q < st.n_a; ++q) {
    if (st.chunks[q].kind == kO) {
      dot_chunk(q, vec, [&](const Chunk& ch, int r, float d) {
        const int lr = ch.row0 + r;
        const float xn = st.xold[lr] + (d + st.ob[lr]);
        st.xrow[lr] = xn;
        a.x[h0 + lr] = xn;
      });
    } else {
      __syncthreads();  // xrow of the last o chunk
      const Chunk ch = st.chunks[q];
      const int s = q % NS;
      mbar_wait(&st.full[s], uint32_t(q / NS) & 1u);
      const float* w = reinterpret_cast<const float*>(ring + size_t(s) * SB);
      for (int e = tid; e < E; e += kThreads) {
        float acc = st.plog[e];
        for (int r = 0; r < ch.nrows; ++r) {
          const int lr = ch.row0 + r;
          acc = fmaf(w[size_t(r) * E + e], st.nw[lr] * st.xrow[lr], acc);
        }
        st.plog[e] = acc;
      }
      __syncthreads();
      request(q + 1 + NS);
    }
  }
  __syncthreads();
  float* part = a.part + size_t(cta) * EP;
  for (int e = tid; e < E; e += kThreads) part[e] = st.plog[e];
  if (warp == 0) {
    float ss = 0.f;
    for (int r = lane; r < nh; r += 32) ss += st.xrow[r] * st.xrow[r];
    ss = warp_sum(ss);
    if (lane == 0) part[E] = ss;
  }
  if (a.trace && tid == 0) st.t[2] = global_ns();
  grid_barrier(a.barrier);
  if (a.trace && tid == 0) st.t[3] = global_ns();

  // Phase 2: logits = rms * sum of the partials (fixed order per column, one round of loads), the sum of squares
  // alike; then the top-k, every expert ranking itself against all others (no serial warp loop).
  {
    const int cols = E / 4;  // float4 columns of logits; ss1 (column E / 4, x) is summed by warp 0 below
    int tpc = 32;
    while (tpc > 1 && tpc * cols > kThreads) tpc >>= 1;
    for (int c0 = 0; c0 < cols; c0 += kThreads / tpc) {
      const int col = c0 + tid / tpc, sub = tid % tpc;
      float4 s4 = make_float4(0.f, 0.f, 0.f, 0.f);
      if (col < cols)
        for (int g0 = sub; g0 < G; g0 += 16 * tpc) {
          float4 p[16];
#pragma unroll
          for (int m = 0; m < 16; ++m) {
            const int g = g0 + m * tpc;
            p[m] = g < G ? __ldcg(reinterpret_cast<const float4*>(a.part + size_t(g) * EP) + col)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
          }
#pragma unroll
          for (int m = 0; m < 16; ++m) s4.x += p[m].x, s4.y += p[m].y, s4.z += p[m].z, s4.w += p[m].w;
        }
      for (int d = 1; d < tpc; d <<= 1) {
        s4.x += __shfl_xor_sync(0xffffffffu, s4.x, d);
        s4.y += __shfl_xor_sync(0xffffffffu, s4.y, d);
        s4.z += __shfl_xor_sync(0xffffffffu, s4.z, d);
        s4.w += __shfl_xor_sync(0xffffffffu, s4.w, d);
      }
      if (col < cols && sub == 0) {
        st.logits[4 * col] = s4.x, st.logits[4 * col + 1] = s4.y;
        st.logits[4 * col + 2] = s4.z, st.logits[4 * col + 3] = s4.w;
      }
    }
    if (warp == kWarps - 1) {
      float ss = 0.f;
      for (int g = lane; g < G; g += 32) ss += __ldcg(a.part + size_t(g) * EP + E);
      ss = warp_sum(ss);
      if (lane == 0) st.logits[E] = ss;
    }
  }
  __syncthreads();
  if (a.trace && tid == 0) st.t[10] = global_ns();
  const float rms = 1.f / sqrtf(st.logits[E] / float(H) + a.eps);
  // softmax over rms * logits, selection on probability + bias, ties to the lower index, weights in selection order:
  // sm90_f32_router_topk's rule (its sums run in another order: equal up to fp32 rounding)
  float* prob = st.plog;  // the partial logits are in global memory by now
  float* choice = st.logits + kMaxE + kPartStride;
  {
    float mx = -FLT_MAX;
    for (int f = 0; f < E; ++f) mx = fmaxf(mx, st.logits[f]);
    mx *= rms;
    float sum = 0.f;
    for (int f = 0; f < E; ++f) sum += __expf(st.logits[f] * rms - mx);
    for (int e = tid; e < E; e += kThreads) {
      const float pe = __expf(st.logits[e] * rms - mx) / sum;
      prob[e] = pe;
      const float c = pe + (a.router_bias ? a.router_bias[e] : 0.f);
      choice[e] = c == c ? c : -FLT_MAX;  // a NaN still ranks (last), so every chosen id is an expert
    }
  }
  __syncthreads();
  for (int e = tid; e < E; e += kThreads) {
    const float c = choice[e];
    int rank = 0;
    for (int f = 0; f < E; ++f) rank += choice[f] > c || (choice[f] == c && f < e);
    if (rank < K) st.ids[rank] = e;
  }
  __syncthreads();
  if (tid < K) {
    float wsum = 0.f;
    for (int r = 0; r < K; ++r) wsum += prob[st.ids[r]];
    const float w = prob[st.ids[tid]];
    st.wts[tid] = a.renormalize ? w / (wsum + 1e-20f) : w;
  }
  __syncthreads();
  if (a.trace && tid == 0) st.t[11] = global_ns();
  // Phase B: each gate|up and down chunk moves to its chosen expert; h's inputs are loaded before the weights are
  // requested (a load issued behind the ring waits for it)
  for (int q = st.n_a + tid; q < st.n_all; q += kThreads) {
    Chunk& c = st.chunks[q];
    c.src += size_t(st.ids[c.j]) * (c.kind == kGateUp ? size_t(2) * I * H * 2 : size_t(H) * I * 2);
  }
  float xv[8], wv[8];
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const int i = m * kThreads + tid;
    xv[m] = i < H ? __ldcg(a.x + i) : 0.f;
    wv[m] = i < H ? a.post_norm[i] : 0.f;
  }
  __syncthreads();
  limit = down_late ? st.n_d0 : st.n_all;
  request(st.n_a + NS);  // every stage is free: phase A is consumed
  if (a.trace && tid == 0) st.t[12] = global_ns();
  // h = rmsnorm(x) in bf16, for the gate|up rows (x's other rows are other CTAs' phase 1)
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const int i = m * kThreads + tid;
    if (i < H) hbv[i] = __float2bfloat16(wv[m] * (xv[m] * rms));
  }
  for (int i = 8 * kThreads + tid; i < H; i += kThreads) hbv[i] = __float2bfloat16(a.post_norm[i] * (__ldcg(a.x + i) * rms));
  __syncthreads();
  if (a.trace && tid == 0) st.t[4] = global_ns();

  int q = st.n_a;
  for (; q < st.n_all && st.chunks[q].kind == kGateUp; ++q) {
    dot_chunk(q, hbv, [&](const Chunk& ch, int r, float d) { a.gu[size_t(ch.j) * 2 * I + ch.row0 + r] = d; });
  }
  if (a.trace && tid == 0) st.t[5] = global_ns();
  grid_barrier(a.barrier);
  if (a.trace && tid == 0) st.t[6] = global_ns();
  pdl_trigger();  // every CTA is resident and past its last wait on the previous kernel

  // Phase 3: a_j = bf16(silu(g) * u) from every CTA's gate|up rows, then the down rows of this CTA's H rows.
  for (int base = 0; base < K * I; base += 8 * kThreads) {
    // eight elements' loads in flight per thread before any result is stored
    float g[8], u[8];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int idx = base + m * kThreads + tid;
      g[m] = u[m] = 0.f;
      if (idx < K * I) {
        const int j = idx / I, i = idx % I;
        const int gr = a.interleaved ? 16 * (i / 8) + (i % 8) : i;
        const int ur = a.interleaved ? gr + 8 : gr + I;
        g[m] = __ldcg(a.gu + size_t(j) * 2 * I + gr), u[m] = __ldcg(a.gu + size_t(j) * 2 * I + ur);
      }
    }
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int idx = base + m * kThreads + tid;
      if (idx < K * I) vec[idx] = __float2bfloat16(__fdividef(g[m], 1.f + __expf(-g[m])) * u[m]);
    }
  }
  if (limit < st.n_all) {  // down_late: the down rows are requested only now (every stage is free)
    limit = st.n_all;
    request(q + NS);
  }
  __syncthreads();
  if (a.trace && tid == 0) st.t[7] = global_ns();
  for (; q < st.n_all; ++q) {
    const int j = st.chunks[q].j;
    dot_chunk(q, vec + size_t(j) * I, [&](const Chunk& ch, int r, float d) {
      const int lr = ch.row0 + r;
      st.acc[lr] += st.wts[ch.j] * bf16_round(d);
    });
  }
  __syncthreads();
  if (a.trace && tid == 0) st.t[8] = global_ns();
  float ss = 0.f;
  for (int r = tid; r < nh; r += kThreads) {
    const float xf = st.xrow[r] + bf16_round(st.acc[r]);
    st.xrow[r] = xf;
    a.x[h0 + r] = xf;
    ss += xf * xf;
  }
  if (!a.next_norm) {  // uniform
    if (a.trace) trace_report(a, st, G);
    return;
  }
  // nh <= kMaxRows <= 64: warps 0 and 1 hold every row
  if (warp < 2) ss = warp_sum(ss);
  if (lane == 0 && warp < 2) st.red[0][warp] = ss;
  __syncthreads();
  if (tid == 0) part[E + 1] = st.red[0][0] + st.red[0][1];
  grid_barrier(a.barrier);
  if (warp == 0) {
    float s = 0.f;
    for (int g = lane; g < G; g += 32) s += __ldcg(a.part + size_t(g) * EP + E + 1);
    s = warp_sum(s);
    if (lane == 0) st.rms2 = 1.f / sqrtf(s / float(H) + a.eps);
  }
  __syncthreads();
  for (int r = tid; r < nh; r += kThreads) a.hb[h0 + r] = __float2bfloat16(st.nn[r] * (st.xrow[r] * st.rms2));
  if (a.trace) trace_report(a, st, G);
}

__global__ void transpose_kernel(const float* __restrict__ in, int rows, int cols, float* __restrict__ out) {
  __shared__ float tile[32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  for (int y = threadIdx.y; y < 32; y += blockDim.y) {
    const int r = blockIdx.y * 32 + y;
    if (r < rows && c < cols) tile[y][threadIdx.x] = in[size_t(r) * cols + c];
  }
  __syncthreads();
  const int r = blockIdx.y * 32 + threadIdx.x;
  for (int y = threadIdx.y; y < 32; y += blockDim.y) {
    const int cc = blockIdx.x * 32 + y;
    if (r < rows && cc < cols) out[size_t(cc) * rows + r] = tile[threadIdx.x][y];
  }
}

struct DeviceLimits {
  int sms = 0, smem_optin = 0;
};

DeviceLimits limits() {
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  DeviceLimits d;
  DC_CUDA(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  DC_CUDA(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return d;
}

struct Plan {
  int grid = 0, stages = 0, stage_bytes = 0;
  size_t smem = 0;
};

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Stage size, stage count and shared memory for a shape; stages == 0 when it does not fit.
Plan plan_for(int H, int Ko, int E, int k, int I, const DeviceLimits& d, std::string* why) {
  Plan p;
  p.grid = d.sms;
  auto no = [&](const std::string& m) {
    if (why) *why = m;
    return Plan{};
  };
  if (H % 8 || Ko % 8 || I % 8 || E % 4) return no("H, Ko and I must be multiples of 8 and E of 4");
  if (E > kMaxE || k > kMaxK || k < 1 || k > E) return no("E <= 256 and 1 <= k <= min(16, E)");
  if (ceil_div(H, p.grid) > kMaxRows) return no("more than 64 rows of H per SM");
  const int max_row = std::max({Ko * 2, E * 4, H * 2, I * 2});
  static const int stage_kb = [] {  // DISPATCH_CUDA_MOE_BLOCK_STAGE_KB: A/B of the ring's stage size
    const char* v = std::getenv("DISPATCH_CUDA_MOE_BLOCK_STAGE_KB");
    return v ? std::max(1, std::atoi(v)) : kStageBytes / 1024;
  }();
  p.stage_bytes = std::max(stage_kb * 1024, (max_row + 127) / 128 * 128);
  const size_t vec = size_t(std::max(Ko, k * I)) * 2 + size_t(H) * 2 + 128;
  const size_t avail = size_t(d.smem_optin) - sizeof(Static) - 1024;
  if (vec >= avail) return no("the activations do not fit in shared memory");
  p.stages = int(std::min<size_t>(kMaxStages, (avail - vec) / p.stage_bytes));
  if (p.stages < 2) return no("fewer than two ring stages fit in shared memory");
  auto per = [&](int row_bytes) { return std::min(p.stage_bytes / row_bytes, kMaxChunkRows); };
  const int nh = ceil_div(H, p.grid), gu = ceil_div(k * 2 * I, p.grid);
  const int chunks = ceil_div(nh, per(Ko * 2)) + ceil_div(nh, per(E * 4)) + ceil_div(gu, per(H * 2)) + k +
                     k * ceil_div(nh, per(I * 2));
  if (chunks > kMaxChunks) return no("more than " + std::to_string(kMaxChunks) + " weight chunks per CTA");
  p.smem = size_t(p.stages) * p.stage_bytes + vec;
  return p;
}

}  // namespace

bool moe_block_supported(int H, int Ko, int E, int k, int I, std::string* why) {
  const DeviceLimits d = limits();
  const Plan p = plan_for(H, Ko, E, k, I, d, why);
  if (p.stages == 0) return false;
  DC_CUDA(cudaFuncSetAttribute(moe_block_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(p.smem)));
  int per_sm = 0;
  DC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_block_kernel, kThreads, p.smem));
  if (per_sm < 1) {
    if (why) *why = "the kernel does not fit on an SM";
    return false;
  }
  return true;
}

size_t moe_block_scratch_bytes(int E, int k, int I) {
  const size_t G = size_t(limits().sms);
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  return up(G * (E + kPartStride) * 4) + up(size_t(k) * 2 * I * 4) + 512;
}

void moe_block_bind_scratch(MoeBlockArgs& a, void* scratch) {
  const size_t G = size_t(limits().sms);
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  char* p = static_cast<char*>(scratch);
  a.part = reinterpret_cast<float*>(p);
  p += up(G * (a.E + kPartStride) * 4);
  a.gu = reinterpret_cast<float*>(p);
  p += up(size_t(a.top_k) * 2 * a.I * 4);
  a.barrier = reinterpret_cast<unsigned*>(p);
  static const bool trace = [] {
    const char* v = std::getenv("DISPATCH_CUDA_MOE_BLOCK_TRACE");
    return v && v[0] == '1';
  }();
  a.trace = trace ? reinterpret_cast<unsigned*>(p + 256) : nullptr;
}

void moe_block(const MoeBlockArgs& a, cudaStream_t stream) {
  static const DeviceLimits d = limits();
  std::string why;
  const Plan p = plan_for(a.H, a.Ko, a.E, a.top_k, a.I, d, &why);
  DC_CHECK(p.stages > 0, "moe_block: " + why);
  DC_CHECK(a.next_norm == nullptr || a.hb != nullptr, "moe_block: a next norm needs hb");
  // A/B switch read once: DISPATCH_CUDA_MOE_BLOCK_DOWN_LATE=0 requests the down rows while gate|up is consumed
  static const int flags = [] {
    const char* late = std::getenv("DISPATCH_CUDA_MOE_BLOCK_DOWN_LATE");
    return late && late[0] == '0' ? 0 : int(kDownLate);
  }();
  launch_k(moe_block_kernel, dim3(p.grid), dim3(kThreads), p.smem, stream, a, p.stages, p.stage_bytes, flags);
  DC_LAUNCHED();
}

void moe_block_transpose(const float* router, int E, int H, float* out, cudaStream_t stream) {
  transpose_kernel<<<dim3(ceil_div(H, 32), ceil_div(E, 32)), dim3(32, 8), 0, stream>>>(router, E, H, out);
  DC_LAUNCHED();
}

}  // namespace dcuda
