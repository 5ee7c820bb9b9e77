// Tiled causal attention for prefill chunks on tensor cores, FlashAttention-2 style, over the paged
// K/V cache (model.cu sends eager steps of >= DISPATCH_CUDA_FLASH_MIN_TOKENS tokens here).
//
// One CTA (4 warps) per (tile of up to kBQ = 64 consecutive query rows of one sequence, query
// head); warp w owns rows 16w .. 16w+15. Per query head rather than per KV head serving the GQA
// group: a 16x512-token Qwen3 step has 128 tiles x 32 heads = 4096 CTAs (a per-KV-head grid would
// have 512, 4 per SM, and each CTA 8x the registers for O), and the 8 heads of one group read the
// same K/V rows close together in time (heads vary fastest in the grid), so the repeat reads hit
// L2 (a layer's whole K/V for 8192 tokens is 16 MB of the 60 MB L2). scripts/prefill_check.cu
// prints the achieved TFLOP/s, the number that decides whether the group variant is worth it.
//
// Keys in tiles of kBK = 64 rows read through the block table with 16-byte cp.async (paged_kv_copy.cuh) into a
// double buffer (tile t+1 loads while tile t computes). S = Q K^T and O += P V with ldmatrix +
// mma.sync m16n8k16 (bf16 in, fp32 accumulate); Q fragments, S, P, O and the online softmax
// (running max m and sum l per row, exp2 with the scale folded in) stay in registers. Causal and
// sliding-window masks come from each row's position; a warp skips key tiles that are fully
// masked for its rows, and masks only tiles that straddle a boundary.
//
// Legend: BQ query rows per CTA, BK keys per tile, D head dim (kD = the padded dim the kernel is
// compiled for: 64 or 128; D < kD is zero-padded in shared memory), G = Hq / Hkv.
// Rows of a tile are consecutive rows of one sequence with non-decreasing positions (a prefill
// chunk; its first position may be > 0 when a prefix is cached).
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include "check.h"
#include "attention_flash_wgmma.h"
#include "ops.h"
#include "flash_plan.h"
#include "flash_tile_math.cuh"
#include "paged_kv_copy.cuh"
#include "smem_opt_in.h"

namespace dcuda {
namespace {

using flash::exp2_ftz;
using flash::pack_bf16;
using flash::quad_max;
using flash::quad_sum;
using paged_kv::cp_async_commit;
using paged_kv::cp_async_wait;

constexpr int kBK = 64, kWarps = 4, kThreads = kWarps * 32;

// kMT: 16-row MMA tiles per warp (1: 64 query rows per CTA, Q fragments kept in registers; 2: 128 rows, each K/V
// fragment read from shared memory feeds two row tiles, Q fragments re-read from shared memory per k step).
template <int kD, int kMT>
struct Shape {
  static constexpr int bq = kWarps * 16 * kMT;           // query rows per CTA
  static constexpr int ld = kD + 8;                      // bf16 row stride: ldmatrix rows on distinct banks
  static constexpr int tile = kBK * ld;                  // one K or V tile (elements)
  static constexpr int q_elems = bq * ld;
  static constexpr size_t bytes = size_t(q_elems + 4 * tile) * 2;  // Q, K x2, V x2
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c[4] += a[4] (16x16 row) . b[2] (16x8 col), bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// K and V rows kb .. kb+kBK-1 of KV head kvh into one stage (zeros past `last` and past D).
template <int kD>
__device__ __forceinline__ void load_kv(const AttentionArgs& a, const int32_t* table, int kvh, int kb, int last,
                                        bf16* sK, bf16* sV) {
  constexpr int ld = kD + 8;
  paged_kv::copy_tile<kD / 8, kBK, kThreads>(a, table, kvh, kb, last, reinterpret_cast<uint8_t*>(sK),
                                             reinterpret_cast<uint8_t*>(sV), threadIdx.x,
                                             [](int r, int c) { return (r * ld + c * 8) * 2; });
}

template <int kD, int kMT>
__global__ void __launch_bounds__(kThreads, 2)
    sm90_bf16_attention_prefill_paged(AttentionArgs a, const int32_t* __restrict__ tiles, bool q_vec) {
  using Sh = Shape<kD, kMT>;
  constexpr int ld = Sh::ld, kBQ = Sh::bq, kNT = kD / 8;  // kNT: 8-wide column tiles of O
  constexpr int kWR = 16 * kMT;                           // rows per warp
  constexpr bool kQRegs = kMT == 1;                       // Q fragments held in registers for the whole loop
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sK = sQ + Sh::q_elems;  // [2][kBK][ld]
  bf16* sV = sK + 2 * Sh::tile;

  const int tile = int(blockIdx.y);  // the plan's order: most keys first
  const int r0 = tiles[2 * tile], nq = tiles[2 * tile + 1];
  const int h = blockIdx.x, kvh = h / (a.Hq / a.Hkv);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t* table = a.tables + size_t(a.tok_seq[r0]) * a.table_stride;
  const int D = a.D;

  const int first = a.pos[r0], last = a.pos[r0 + nq - 1];
  const int kmin = a.window > 0 ? max(0, first - a.window + 1) : 0;
  const int n_kt = (last - kmin) / kBK + 1;

  load_kv<kD>(a, table, kvh, kmin, last, sK, sV);
  cp_async_commit();

  // Q rows (fp32, unscaled) -> bf16 in shared memory; zeros past nq and past D
  for (int c = threadIdx.x; c < kBQ * (kD / 4); c += kThreads) {
    const int i = c / (kD / 4), d = (c % (kD / 4)) * 4;
    *reinterpret_cast<uint2*>(sQ + i * ld + d) = flash::q_bf16x4(a, r0, i, nq, h, d, q_vec);
  }
  __syncthreads();
  // the warp's Q rows as ldmatrix sources: row tile mt, k step kk
  auto q_src = [&](int mt, int kk) { return sQ + (warp * kWR + mt * 16 + (lane & 15)) * ld + (lane >> 4) * 8 + kk * 16; };
  uint32_t qf[kQRegs ? kD / 16 : 1][4];
  if constexpr (kQRegs) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) ldmatrix_x4(qf[kk], q_src(0, kk));
  }

  // this thread's rows: lane/4 and lane/4 + 8 of each of the warp's row tiles; position -1: past the tile (masked)
  int p[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const int wr = warp * kWR + mt * 16 + (lane >> 2);
    p[mt][0] = wr < nq ? a.pos[r0 + wr] : -1;
    p[mt][1] = wr + 8 < nq ? a.pos[r0 + wr + 8] : -1;
  }
  // the warp's first and last valid positions (rows are in order)
  const int w_first = warp * kWR < nq ? a.pos[r0 + warp * kWR] : INT_MAX;
  const int w_last = warp * kWR < nq ? a.pos[r0 + min(nq, warp * kWR + kWR) - 1] : -1;
  const float scale_log2 = a.scale * 1.4426950408889634f;

  float o[kMT][kNT][4];
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int n = 0; n < kNT; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
  }

  for (int t = 0; t < n_kt; ++t) {
    const int kb = kmin + t * kBK;
    const int stage = t & 1;
    if (t + 1 < n_kt) {
      load_kv<kD>(a, table, kvh, kb + kBK, last, sK + (stage ^ 1) * Sh::tile, sV + (stage ^ 1) * Sh::tile);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const bf16* K = sK + stage * Sh::tile;
    const bf16* V = sV + stage * Sh::tile;
    // the warp's rows see keys [w_first - window + 1, w_last]; skip tiles outside that range
    const bool any = kb <= w_last && (a.window <= 0 || kb + kBK - 1 >= w_first - a.window + 1);
    if (any) {
      float s[kMT][kBK / 8][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int n = 0; n < kBK / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        uint32_t qa[kMT][4];
        if constexpr (kQRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qa[0][e] = qf[kk][e];
        } else {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) ldmatrix_x4(qa[mt], q_src(mt, kk));
        }
#pragma unroll
        for (int n = 0; n < kBK / 8; n += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, K + (n * 8 + (lane >> 4) * 8 + (lane & 7)) * ld + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_bf16(s[mt][n], qa[mt], b[0], b[1]);
            mma_bf16(s[mt][n + 1], qa[mt], b[2], b[3]);
          }
        }
      }
      // mask only when some key of the tile is outside some row's range
      const bool partial = kb + kBK - 1 > w_first || (a.window > 0 && kb < w_last - a.window + 1) ||
                           warp * kWR + kWR > nq;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if (partial) {
          const int lo0 = a.window > 0 ? p[mt][0] - a.window + 1 : 0, lo1 = a.window > 0 ? p[mt][1] - a.window + 1 : 0;
#pragma unroll
          for (int n = 0; n < kBK / 8; ++n) {
            const int j = kb + n * 8 + (lane & 3) * 2;
            if (j > p[mt][0] || j < lo0) s[mt][n][0] = -INFINITY;
            if (j + 1 > p[mt][0] || j + 1 < lo0) s[mt][n][1] = -INFINITY;
            if (j > p[mt][1] || j < lo1) s[mt][n][2] = -INFINITY;
            if (j + 1 > p[mt][1] || j + 1 < lo1) s[mt][n][3] = -INFINITY;
          }
        }
        float mx0 = m[mt][0], mx1 = m[mt][1];
#pragma unroll
        for (int n = 0; n < kBK / 8; ++n) {
          mx0 = fmaxf(mx0, fmaxf(s[mt][n][0], s[mt][n][1]) * scale_log2);
          mx1 = fmaxf(mx1, fmaxf(s[mt][n][2], s[mt][n][3]) * scale_log2);
        }
        mx0 = quad_max(mx0), mx1 = quad_max(mx1);
        // a row with nothing visible yet keeps m = -inf: subtract 0 instead (exp2(-inf) = 0)
        const float b0 = mx0 == -INFINITY ? 0.f : mx0, b1 = mx1 == -INFINITY ? 0.f : mx1;
        const float c0 = exp2_ftz(m[mt][0] - b0), c1 = exp2_ftz(m[mt][1] - b1);
        m[mt][0] = mx0, m[mt][1] = mx1;
        float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
        for (int n = 0; n < kBK / 8; ++n) {
          s[mt][n][0] = exp2_ftz(s[mt][n][0] * scale_log2 - b0), s[mt][n][1] = exp2_ftz(s[mt][n][1] * scale_log2 - b0);
          s[mt][n][2] = exp2_ftz(s[mt][n][2] * scale_log2 - b1), s[mt][n][3] = exp2_ftz(s[mt][n][3] * scale_log2 - b1);
          sum0 += s[mt][n][0] + s[mt][n][1], sum1 += s[mt][n][2] + s[mt][n][3];
        }
        l[mt][0] = l[mt][0] * c0 + quad_sum(sum0), l[mt][1] = l[mt][1] * c1 + quad_sum(sum1);
#pragma unroll
        for (int n = 0; n < kNT; ++n) o[mt][n][0] *= c0, o[mt][n][1] *= c0, o[mt][n][2] *= c1, o[mt][n][3] *= c1;
      }
      // O += P V: P's accumulator layout is the A-fragment layout of the next mma
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        uint32_t pa[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          pa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          pa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          pa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          pa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int n = 0; n < kNT; n += 2) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, V + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * ld + n * 8 + (lane >> 4) * 8);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_bf16(o[mt][n], pa[mt], b[0], b[1]);
            mma_bf16(o[mt][n + 1], pa[mt], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // this stage is reloaded by the next iteration's prefetch
  }

  // O / l -> bf16 through the warp's own Q rows (no other warp reads them), then 16-byte stores
  bf16* sO = sQ + warp * kWR * ld;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const float inv0 = l[mt][0] > 0.f ? 1.f / l[mt][0] : 0.f, inv1 = l[mt][1] > 0.f ? 1.f / l[mt][1] : 0.f;
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      const int col = n * 8 + (lane & 3) * 2;
      *reinterpret_cast<uint32_t*>(sO + (mt * 16 + (lane >> 2)) * ld + col) = pack_bf16(o[mt][n][0] * inv0, o[mt][n][1] * inv0);
      *reinterpret_cast<uint32_t*>(sO + (mt * 16 + (lane >> 2) + 8) * ld + col) =
          pack_bf16(o[mt][n][2] * inv1, o[mt][n][3] * inv1);
    }
  }
  __syncwarp();
  for (int c = lane; c < kWR * (kD / 8); c += 32) {
    const int i = c / (kD / 8), d = (c % (kD / 8)) * 8;
    const int row = warp * kWR + i;
    if (row < nq && d < D)
      *reinterpret_cast<uint4*>(a.out + size_t(r0 + row) * a.Hq * D + size_t(h) * D + d) =
          *reinterpret_cast<const uint4*>(sO + i * ld + d);
  }
}

// An environment switch that takes 64 or 128 (read once per call site: callers keep it in a static); unset: fallback.
int env_64_or_128(const char* name, int fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  const int x = std::atoi(e);
  DC_CHECK(x == 64 || x == 128, std::string(name) + " must be 64 or 128, got " + e);
  return x;
}

// DISPATCH_CUDA_FLASH_ROWS: the mma.sync kernel's query rows per tile, forced; 0: the plan's rule.
int forced_rows() {
  static const int v = env_64_or_128("DISPATCH_CUDA_FLASH_ROWS", 0);
  return v;
}
// DISPATCH_CUDA_FLASH_WGMMA_KEYS (64 or 128): the wgmma kernel's keys per K/V tile, forced; unset: 64 at D > 64
// (prefill check, session 25: 1.04-1.15x at 16 x 512 and 32 x 256, 1.03x at 2 x 2,048, equal at 1 x 8,192: the
// diagonal tiles' masked half is smaller), 128 at D <= 64 (64 keys: 0.89x at 1 x 4,096 with 64 query heads).
int wgmma_keys(int D) {
  static const int v = env_64_or_128("DISPATCH_CUDA_FLASH_WGMMA_KEYS", 0);
  return v != 0 ? v : D > 64 ? 64 : 128;
}

template <int kD, int kMT>
void launch(const AttentionArgs& a, const int32_t* tiles, int num_tiles, cudaStream_t s) {
  using Sh = Shape<kD, kMT>;
  static std::atomic<uint64_t> opted{0};
  opt_in_shared_memory(sm90_bf16_attention_prefill_paged<kD, kMT>, Sh::bytes, opted);
  const bool q_vec = a.ldq % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  sm90_bf16_attention_prefill_paged<kD, kMT><<<dim3(a.Hq, num_tiles), kThreads, Sh::bytes, s>>>(a, tiles, q_vec);
  DC_LAUNCHED();
}

}  // namespace

bool attention_flash_supported(int D) { return D % 16 == 0 && D >= 16 && D <= 128; }

namespace {
// DISPATCH_CUDA_FLASH_KERNEL (mma or wgmma, read once per process): the kernel, forced; unset: the plan's rule.
FlashKernel forced_kernel() {
  static const FlashKernel v = [] {
    const char* e = std::getenv("DISPATCH_CUDA_FLASH_KERNEL");
    if (!e || !*e) return FlashKernel::kAuto;
    const std::string s = e;
    DC_CHECK(s == "mma" || s == "wgmma", "DISPATCH_CUDA_FLASH_KERNEL must be mma or wgmma, got " + s);
    return s == "mma" ? FlashKernel::kMma : FlashKernel::kWgmma;
  }();
  return v;
}
// DISPATCH_CUDA_FLASH_PERSISTENT (0 or 1, read once per process): the wgmma kernel's persistent grid, forced; unset:
// the plan's rule.
int forced_persistent() {
  static const int v = [] {
    const char* e = std::getenv("DISPATCH_CUDA_FLASH_PERSISTENT");
    if (!e || !*e) return -1;
    const std::string s = e;
    DC_CHECK(s == "0" || s == "1", "DISPATCH_CUDA_FLASH_PERSISTENT must be 0 or 1, got " + s);
    return s == "1" ? 1 : 0;
  }();
  return v;
}
}  // namespace

FlashPlan plan_attention_flash(const int32_t* tok_seq, const int32_t* pos, int T, int Hq, int window, int32_t* tiles,
                               FlashKernel want) {
  FlashPlanInputs in;
  in.tok_seq = tok_seq, in.pos = pos, in.T = T, in.Hq = Hq, in.window = window, in.sms = current_device_sms();
  in.want = want != FlashKernel::kAuto ? want : forced_kernel();
  in.mma_rows = forced_rows();
  in.persistent = forced_persistent();
  return plan_flash(in, tiles);
}

void attention_flash(const AttentionArgs& a, const int32_t* tiles, const FlashPlan& plan, cudaStream_t s) {
  const int num_tiles = plan.num_tiles;
  DC_CHECK(plan.rows == 64 || plan.rows == 128, "flash attention tiles are 64 or 128 rows");
  DC_CHECK(plan.kernel != FlashKernel::kWgmma || plan.rows == 128, "the wgmma flash kernel takes 128-row tiles");
  DC_CHECK(attention_flash_supported(a.D), "flash attention needs D % 16 == 0 and D <= 128");
  DC_CHECK(a.Hkv > 0 && a.Hq % a.Hkv == 0, "query heads must be a multiple of KV heads");
  DC_CHECK(plan.kernel == FlashKernel::kWgmma || num_tiles <= 65535, "flash attention: too many tiles for one launch");
  DC_CHECK((reinterpret_cast<uintptr_t>(a.k_cache) | reinterpret_cast<uintptr_t>(a.v_cache) |
            reinterpret_cast<uintptr_t>(a.out)) % 16 == 0,
           "flash attention needs 16-byte aligned K/V caches and output");
  if (num_tiles == 0) return;
  if (plan.kernel == FlashKernel::kWgmma)
    return attention_flash_wgmma(a, tiles, num_tiles, wgmma_keys(a.D), plan.ctas, s);
  const bool wide = plan.rows == 128;
  if (a.D <= 64) wide ? launch<64, 2>(a, tiles, num_tiles, s) : launch<64, 1>(a, tiles, num_tiles, s);
  else wide ? launch<128, 2>(a, tiles, num_tiles, s) : launch<128, 1>(a, tiles, num_tiles, s);
}

}  // namespace dcuda
