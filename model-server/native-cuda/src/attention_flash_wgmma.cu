// Causal prefill attention on Hopper's warpgroup MMAs (wgmma) over the paged K/V cache: the loop of
// attention_flash.cu (FlashAttention-2: online softmax in registers, keys in tiles) with both products on
// wgmma instead of per-warp mma.sync, so the tensor cores take 64 x N x 16 products from shared memory without
// ldmatrix, and the query tile is 128 rows that share each K/V tile.
//
// Work items: (tile of up to kBQ = 128 consecutive query rows of one sequence, query head). A CTA (three warpgroups,
// 384 threads) takes one item, or, with a persistent grid (one CTA per SM, FlashPlan::ctas), walks items strided by
// the grid, so one item's pipeline fill and epilogue overlap another's products. Warp-specialized: warpgroups 0 and 1
// compute, warpgroup g the rows 64g .. 64g+63 (the accumulator layout
// of wgmma m64nN: d[4j + c] at row 16(w % 4) + lane/4 + 8(c >> 1), column 8j + 2(lane % 4) + (c & 1) of its 64
// rows, the per-thread layout of attention_flash.cu's mma.sync tiles); warpgroup 2 copies K/V tiles (16-byte
// cp.async through the block table, paged_kv_copy.cuh: keys past the chunk are zero-filled)
// into a ring of kStages stages. Stage hand-over by mbarriers: full[s] completes when all 128 copier threads'
// copies have landed (cp.async.mbarrier.arrive.noinc), empty[s] when each of the eight compute warps is
// done with it, so the two compute warpgroups run out of step (one's softmax overlaps the other's MMAs) and never
// wait on a CTA-wide barrier. Every warp releases for itself (lane 0): a warp's tiles outside its warpgroup's rows
// are only waited on and released, so the warps of a warpgroup drift apart there, and when one thread per warpgroup
// released, a warp that lagged behind it could find the stage refilled with the tile kStages later, the `full` phase
// it waited on completed twice, its parity come round again: it waited for ever. Only the persistent grid has that
// later tile (the next item's) to refill with; it hung the model about one run in 30 (session 26: cuda-gdb showed
// one warp of a warpgroup in the trailing loop's wait, its three peers at the output's barrier; 100 of 100 runs
// clean with per-warp releases).
//
// Shared memory, 1024-byte aligned, every tile in panels of 64 head-dim elements (128-byte rows, 128B swizzle:
// the 16-byte chunk c of row r sits at chunk c ^ (r % 8)):
//   Q [kBQ rows]  bf16 (converted from the fp32 q rows by the compute warpgroups), the A operand of S = Q K^T
//   kStages x { K [kBK keys], V [kBK keys] }. K is S's B operand (K-major: a key's head dim contiguous); V is O's
//   B operand read N-major (imm-trans-b: a key's row holds N = head dim contiguous), so both are copied alike.
// Per key tile and compute warpgroup: S (64 x kBK) = wgmma SS; masks (causal, window, rows past the tile),
// running max and sum, O rescale; P (bf16 in registers, the A fragment layout) times V = wgmma RS into O
// (64 x kD fp32). Pipelined as FlashAttention-3 does within a warpgroup: tile t's S is issued before tile t - 1's
// P V, so the softmax of tile t overlaps that product. A warpgroup skips the MMAs of tiles its rows do not see
// (wgmma is collective, so the decisions are warpgroup-uniform) and still releases their stages.
// Output: O / l as bf16 through the warpgroup's own Q rows, then 16-byte stores.
//
// Legend: BQ query rows per CTA, BK keys per tile, D head dim (kD = the padded dim compiled for: 64 or 128;
// D < kD is zero-padded), G = Hq / Hkv.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include "attention_flash_wgmma.h"
#include "check.h"
#include "common/sm90.cuh"
#include "gemm/wgmma_rs_tb_m64k16.cuh"
#include "gemm/wgmma_ss_m64k16.cuh"
#include "flash_tile_math.cuh"
#include "paged_kv_copy.cuh"
#include "smem_opt_in.h"

namespace dcuda {
namespace {

namespace sm90 = dispatch::sm90;
using flash::exp2_ftz;
using flash::pack_bf16;
using flash::quad_max;
using flash::quad_sum;
using paged_kv::cp_async_arrive_noinc;
using paged_kv::cp_async_wait_all;

constexpr int kWG = 2;                // compute warpgroups, 64 query rows each
constexpr int kBQ = 64 * kWG;         // query rows per CTA
constexpr int kThreads = 128 * (kWG + 1);  // + the copier warpgroup

template <int kD, int kBK>
struct WShape {
  static constexpr int stages = kBK == 64 ? 4 : 3;  // K/V tiles in the ring
  static constexpr int chunks = kD / 8;             // 16-byte chunks per row
  static constexpr int q_panel = kBQ * 128;         // bytes of one 64-wide head-dim panel of Q
  static constexpr int kv_panel = kBK * 128;        // ... of K or V
  static constexpr int q_bytes = (kD / 64) * q_panel;
  static constexpr int kv_bytes = (kD / 64) * kv_panel;
  static constexpr int stage_bytes = 2 * kv_bytes;  // K then V
  static constexpr size_t smem = size_t(q_bytes) + size_t(stages) * stage_bytes + 1024;  // + alignment slack
  static_assert(smem <= 232448, "shared memory per CTA");
};

// Byte offset of 16-byte chunk `chunk` (of kD / 8) of row `row` in a panel-major 128B-swizzled tile.
__device__ __forceinline__ int sw128(int row, int chunk, int panel_bytes) {
  return (chunk >> 3) * panel_bytes + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}

__device__ __forceinline__ void warpgroup_sync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
}

// One work item: a tile of query rows and a query head. Items are numbered with heads fastest over the plan's tiles
// (most keys first), so CTAs running together read the same K/V rows (L2) and the long items start early.
struct Item {
  int r0, nq, h, kvh;  // first row, rows, query head, KV head
  const int32_t* table;
  int first, last, kmin, n_kt;  // first and last positions, first key, key tiles
};

template <int kBK>
__device__ __forceinline__ Item item_at(const AttentionArgs& a, const int32_t* __restrict__ tiles, int item) {
  Item it;
  const int tile = item / a.Hq;
  it.h = item % a.Hq;
  it.kvh = it.h / (a.Hq / a.Hkv);
  it.r0 = tiles[2 * tile], it.nq = tiles[2 * tile + 1];
  it.table = a.tables + size_t(a.tok_seq[it.r0]) * a.table_stride;
  it.first = a.pos[it.r0], it.last = a.pos[it.r0 + it.nq - 1];
  it.kmin = a.window > 0 ? max(0, it.first - a.window + 1) : 0;
  it.n_kt = (it.last - it.kmin) / kBK + 1;
  return it;
}

// Grid: gridDim.x = G CTAs walk the num_tiles x Hq items in rounds of G, CTA b taking item b of even rounds and
// G - 1 - b of odd ones (one item each when the grid has one CTA per item). The K/V ring and its mbarrier phases run
// on across a CTA's items (the copier fills the next item's first stages while the compute warpgroups finish the last
// one), and each compute warpgroup loads its next item's Q rows into registers while its last O += P V runs.
template <int kD, int kBK>
__global__ void __launch_bounds__(kThreads, 1)
    sm90_bf16_attention_prefill_wgmma(AttentionArgs a, const int32_t* __restrict__ tiles, int num_tiles, bool q_vec) {
  using Sh = WShape<kD, kBK>;
  constexpr int kStages = Sh::stages;
  constexpr int kNS = kBK / 8;  // 8-column groups of S
  constexpr int kNO = kD / 8;   // ... of O
  constexpr int kQLoads = 64 * (kD / 4) / 128;  // 4-element Q pieces per compute thread
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sQ = smem;
  uint8_t* sKV = smem + Sh::q_bytes;

  const int num_items = num_tiles * a.Hq;
  // this CTA's item of round r: rounds deal gridDim.x items each, alternately forwards and backwards (the items come
  // most keys first, so each CTA's costs sum to about the same)
  const int grid = int(gridDim.x), b = int(blockIdx.x);
  auto item_of = [grid, b](int r) { return r * grid + ((r & 1) ? grid - 1 - b : b); };
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = tid >> 7;
  const int D = a.D;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) sm90::mbar_init(&full[s], 128), sm90::mbar_init(&empty[s], 4 * kWG);
    sm90::mbar_fence_init();
  }
  __syncthreads();

  if (wg == kWG) {  // the copier warpgroup
    sm90::setmaxnreg_dec<40>();
    const int ct = tid - kWG * 128;
    int g = 0;  // K/V tiles copied by this CTA so far (the ring's position and phase)
    for (int r = 0, item = item_of(0); item < num_items; item = item_of(++r)) {
      const Item it = item_at<kBK>(a, tiles, item);
      for (int nt = 0; nt < it.n_kt; ++nt, ++g) {
        const int s = g % kStages;
        sm90::mbar_wait(&empty[s], ((g / kStages) & 1) ^ 1);  // the first round passes at once
        uint8_t* st = sKV + s * Sh::stage_bytes;
        paged_kv::copy_tile<Sh::chunks, kBK, 128>(a, it.table, it.kvh, it.kmin + nt * kBK, it.last, st,
                                                  st + Sh::kv_bytes, ct,
                                                  [](int r, int c) { return sw128(r, c, Sh::kv_panel); });
        cp_async_arrive_noinc(&full[s]);
      }
    }
    cp_async_wait_all();
    return;
  }
  sm90::setmaxnreg_inc<232>();

  const float scale_log2 = a.scale * 1.4426950408889634f;
  const uint8_t* q_rows = sQ + wg * 64 * 128;  // this warpgroup's rows in each Q panel
  auto stage_of = [&](int t) { return sKV + (t % kStages) * Sh::stage_bytes; };
  auto wait_full = [&](int t) {
    sm90::mbar_wait(&full[t % kStages], (t / kStages) & 1);
    sm90::fence_proxy_async_shared();  // the copies (generic proxy) before this warpgroup's wgmma reads
  };
  auto release = [&](int t) {
    if (lane == 0) sm90::mbar_arrive(&empty[t % kStages]);  // this warp is done with the stage
  };
  // this warpgroup's Q rows of an item (fp32, unscaled) -> bf16 in registers (zeros past nq and past D), then into
  // shared memory, swizzled
  uint2 qv[kQLoads];
  auto load_q = [&](const Item& it) {
#pragma unroll
    for (int j = 0; j < kQLoads; ++j) {
      const int c = (tid & 127) + 128 * j;
      qv[j] = flash::q_bf16x4(a, it.r0, wg * 64 + c / (kD / 4), it.nq, it.h, (c % (kD / 4)) * 4, q_vec);
    }
  };
  auto store_q = [&] {
#pragma unroll
    for (int j = 0; j < kQLoads; ++j) {
      const int c = (tid & 127) + 128 * j;
      const int i = wg * 64 + c / (kD / 4), d = (c % (kD / 4)) * 4;
      *reinterpret_cast<uint2*>(sQ + sw128(i, d / 8, Sh::q_panel) + (d % 8) * 2) = qv[j];
    }
    sm90::fence_proxy_async_shared();
    warpgroup_sync(wg);  // Q's rows are in for the warpgroup's wgmma
  };

  int g0 = 0;  // K/V tiles of this CTA's earlier items (the ring position of this item's tile 0)
  if (item_of(0) < num_items) load_q(item_at<kBK>(a, tiles, item_of(0)));
  for (int r = 0; item_of(r) < num_items; ++r) {
    const Item it = item_at<kBK>(a, tiles, item_of(r));
    const int r0 = it.r0, nq = it.nq, kmin = it.kmin, n_kt = it.n_kt;
    store_q();

    // this thread's rows: lane/4 and lane/4 + 8 of the warp's 16; position -1: past the tile (masked)
    const int wr = warp * 16 + (lane >> 2);
    const int p0 = wr < nq ? a.pos[r0 + wr] : -1, p1 = wr + 8 < nq ? a.pos[r0 + wr + 8] : -1;
    // first and last valid positions of the warp (for masking) and of the warpgroup (for skipping tiles)
    const int w_first = warp * 16 < nq ? a.pos[r0 + warp * 16] : INT_MAX;
    const int w_last = warp * 16 < nq ? a.pos[r0 + min(nq, warp * 16 + 16) - 1] : -1;
    const int g_first = wg * 64 < nq ? a.pos[r0 + wg * 64] : INT_MAX;
    const int g_last = wg * 64 < nq ? a.pos[r0 + min(nq, wg * 64 + 64) - 1] : -1;

    float o[kD / 2];
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

    float s[kBK / 2];           // S of the tile being computed
    uint32_t pa[kBK / 16][4];   // P of the previous tile (bf16, the A fragments of O += P V)
    auto issue_s = [&](int t) {  // S = Q K^T
      const uint8_t* K = stage_of(g0 + t);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const int off = (kk & 3) * 32;  // 16 of the panel's 64 head-dim elements
        sm90::wgmma_ss_m64k16<kBK>(s, sm90::desc_k_major_sw128(q_rows + (kk >> 2) * Sh::q_panel + off),
                                   sm90::desc_k_major_sw128(K + (kk >> 2) * Sh::kv_panel + off), kk > 0);
      }
      sm90::wgmma_commit();
    };
    auto issue_pv = [&](int t) {  // O += P V
      const uint8_t* V = stage_of(g0 + t) + Sh::kv_bytes;
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)
        sm90::wgmma_rs_tb_m64k16<kD>(o, pa[kk], sm90::desc_mn_major_sw128(V + kk * 16 * 128, Sh::kv_panel), 1);
      sm90::wgmma_commit();
    };
    // masks, running max and sum of tile t's S; S becomes exp2 of the scaled scores; returns O's rescale factors
    auto softmax = [&](int t, float& c0, float& c1) {
      const int kb = kmin + t * kBK;
      // mask only when some key of the tile is outside some row's range
      const bool partial =
          kb + kBK - 1 > w_first || (a.window > 0 && kb < w_last - a.window + 1) || warp * 16 + 16 > nq;
      if (partial) {
        const int lo0 = a.window > 0 ? p0 - a.window + 1 : 0, lo1 = a.window > 0 ? p1 - a.window + 1 : 0;
#pragma unroll
        for (int n = 0; n < kNS; ++n) {
          const int j = kb + n * 8 + (lane & 3) * 2;
          if (j > p0 || j < lo0) s[4 * n] = -INFINITY;
          if (j + 1 > p0 || j + 1 < lo0) s[4 * n + 1] = -INFINITY;
          if (j > p1 || j < lo1) s[4 * n + 2] = -INFINITY;
          if (j + 1 > p1 || j + 1 < lo1) s[4 * n + 3] = -INFINITY;
        }
      }
      float r0 = -INFINITY, r1 = -INFINITY;  // raw maxima (the scale is positive)
#pragma unroll
      for (int n = 0; n < kNS; ++n) {
        r0 = fmaxf(r0, fmaxf(s[4 * n], s[4 * n + 1]));
        r1 = fmaxf(r1, fmaxf(s[4 * n + 2], s[4 * n + 3]));
      }
      const float mx0 = fmaxf(m0, quad_max(r0) * scale_log2), mx1 = fmaxf(m1, quad_max(r1) * scale_log2);
      // a row with nothing visible yet keeps m = -inf: subtract 0 instead (exp2(-inf) = 0)
      const float b0 = mx0 == -INFINITY ? 0.f : mx0, b1 = mx1 == -INFINITY ? 0.f : mx1;
      c0 = exp2_ftz(m0 - b0), c1 = exp2_ftz(m1 - b1);
      m0 = mx0, m1 = mx1;
      float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
      for (int n = 0; n < kNS; ++n) {
        s[4 * n] = exp2_ftz(s[4 * n] * scale_log2 - b0), s[4 * n + 1] = exp2_ftz(s[4 * n + 1] * scale_log2 - b0);
        s[4 * n + 2] = exp2_ftz(s[4 * n + 2] * scale_log2 - b1);
        s[4 * n + 3] = exp2_ftz(s[4 * n + 3] * scale_log2 - b1);
        sum0 += s[4 * n] + s[4 * n + 1], sum1 += s[4 * n + 2] + s[4 * n + 3];
      }
      l0 = l0 * c0 + quad_sum(sum0), l1 = l1 * c1 + quad_sum(sum1);
    };
    auto pack_p = [&] {  // P's accumulator layout is the register A fragment of O += P V
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        pa[kk][0] = pack_bf16(s[8 * kk], s[8 * kk + 1]);
        pa[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
        pa[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
        pa[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
      }
    };

    // The tiles this warpgroup's rows see: [t_lo, t_hi] (keys [g_first - window + 1, g_last]); it still waits for
    // and releases every other tile of the ring. Pipelined: tile t's S = Q K^T is issued before tile t - 1's
    // O += P V, and tile t's softmax runs while that product is on the tensor cores. The next item's Q loads go
    // out while the last product runs (its S products have read this item's Q by then).
    const int lo_key = a.window > 0 ? g_first - a.window + 1 : 0;
    const int t_lo = lo_key > kmin ? (lo_key - kmin) / kBK : 0;
    const int t_hi = g_last >= kmin ? min(n_kt - 1, (g_last - kmin) / kBK) : -1;
    bool q_loaded = item_of(r + 1) >= num_items;  // no next item: nothing to load
    for (int t = 0; t < min(t_lo, n_kt); ++t) wait_full(g0 + t), release(g0 + t);
    if (t_lo <= t_hi) {
      float c0, c1;
      wait_full(g0 + t_lo);
      sm90::wgmma_fence();
      issue_s(t_lo);
      sm90::wgmma_wait<0>();
      softmax(t_lo, c0, c1);  // O is still zero: no rescale
      pack_p();
      for (int t = t_lo + 1; t <= t_hi; ++t) {
        wait_full(g0 + t);
        sm90::wgmma_fence();
        issue_s(t);
        issue_pv(t - 1);
        sm90::wgmma_wait<1>();  // S of tile t
        softmax(t, c0, c1);
        sm90::wgmma_wait<0>();  // O += P V of tile t - 1
        release(g0 + t - 1);
#pragma unroll
        for (int n = 0; n < kNO; ++n) o[4 * n] *= c0, o[4 * n + 1] *= c0, o[4 * n + 2] *= c1, o[4 * n + 3] *= c1;
        pack_p();
      }
      sm90::wgmma_fence();
      issue_pv(t_hi);
      if (!q_loaded) load_q(item_at<kBK>(a, tiles, item_of(r + 1))), q_loaded = true;
      sm90::wgmma_wait<0>();
      release(g0 + t_hi);
    }
    for (int t = max(t_lo, t_hi + 1); t < n_kt; ++t) wait_full(g0 + t), release(g0 + t);
    if (!q_loaded) load_q(item_at<kBK>(a, tiles, item_of(r + 1)));
    g0 += n_kt;

    // O / l -> bf16 through the warpgroup's own Q rows (its last wgmma has read them), then 16-byte stores
    uint8_t* sO = sQ + wg * 64 * 128;
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
    const int lr = (warp & 3) * 16 + (lane >> 2);  // row in the warpgroup's 64
#pragma unroll
    for (int n = 0; n < kNO; ++n) {
      const int b = (lane & 3) * 4;  // byte of the column pair in its 16-byte chunk
      *reinterpret_cast<uint32_t*>(sO + sw128(lr, n, Sh::q_panel) + b) =
          pack_bf16(o[4 * n] * inv0, o[4 * n + 1] * inv0);
      *reinterpret_cast<uint32_t*>(sO + sw128(lr + 8, n, Sh::q_panel) + b) =
          pack_bf16(o[4 * n + 2] * inv1, o[4 * n + 3] * inv1);
    }
    warpgroup_sync(wg);
    for (int c = tid & 127; c < 64 * Sh::chunks; c += 128) {
      const int i = c / Sh::chunks, ch = c % Sh::chunks;
      const int row = wg * 64 + i;
      if (row < nq && ch * 8 < D)
        *reinterpret_cast<uint4*>(a.out + size_t(r0 + row) * a.Hq * D + size_t(it.h) * D + ch * 8) =
            *reinterpret_cast<const uint4*>(sO + sw128(i, ch, Sh::q_panel));
    }
    warpgroup_sync(wg);  // the O rows are out of shared memory before the next item's Q goes in
  }
}

template <int kD, int kBK>
void launch(const AttentionArgs& a, const int32_t* tiles, int num_tiles, int ctas, cudaStream_t s) {
  using Sh = WShape<kD, kBK>;
  static std::atomic<uint64_t> opted{0};
  opt_in_shared_memory(sm90_bf16_attention_prefill_wgmma<kD, kBK>, Sh::smem, opted);
  const bool q_vec = a.ldq % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  sm90_bf16_attention_prefill_wgmma<kD, kBK>
      <<<ctas, kThreads, Sh::smem, s>>>(a, tiles, num_tiles, q_vec);
  DC_LAUNCHED();
}

}  // namespace

void attention_flash_wgmma(const AttentionArgs& a, const int32_t* tiles, int num_tiles, int keys, int ctas,
                           cudaStream_t s) {
  DC_CHECK(keys == 64 || keys == 128, "the wgmma flash kernel takes 64- or 128-key tiles");
  DC_CHECK(ctas >= 0, "the wgmma flash kernel's CTA count must be >= 0");
  const long items = long(num_tiles) * a.Hq;
  DC_CHECK(items <= INT_MAX, "flash attention: too many (tile, head) items for one launch");
  const int grid = ctas > 0 ? int(std::min<long>(ctas, items)) : int(items);
  const bool wide = keys == 128;
  if (a.D <= 64) wide ? launch<64, 128>(a, tiles, num_tiles, grid, s) : launch<64, 64>(a, tiles, num_tiles, grid, s);
  else wide ? launch<128, 128>(a, tiles, num_tiles, grid, s) : launch<128, 64>(a, tiles, num_tiles, grid, s);
}

}  // namespace dcuda
