// W8A16 grouped GEMM on Hopper tensor cores, contiguous rows: Y[r, n] = s[e, n] * sum_k X[r, k] * Wq[e, n, k]
// for the rows r of expert e (int8 weights Wq with per-output-row fp32 scales s, bf16 X and Y).
//
// Legend: M rows (grouped by expert, offsets[E+1]), E experts, N outputs, K inputs, NTOK tokens per
// tile, kb 128-wide k blocks.
//
// The weights are the big operand at every size this kernel serves (decode batches of ~4-60 rows per
// expert, prefill chunks), so they take the A side of wgmma and the tokens the N side:
// - A tile is 128 weight rows x 128 k (16 KB of int8), TMA-loaded in the 128B swizzle into a ring
//   of shared memory next to the matching X tile (NTOK tokens x 128 k, two 64-k boxes; rows past
//   the expert's rows belong to the next expert or lie past M, where TMA writes zeros; the
//   epilogue drops them). 3-12 stages per CTA depending on NTOK and CTAS: 96-192 KB of weights in
//   flight per SM.
// - 2 consumer warpgroups (warps 0-7), each on 64 of the tile's 128 weight rows, and one producer
//   warp (one thread issues the TMA loads). A consumer thread reads its A fragment bytes straight
//   from the swizzled int8 tile (sign-extending byte loads), converts them exactly to bf16 (int ->
//   fp32, upper halves packed to bf16x2) and runs wgmma m64nNTOKk16 with A from registers and X
//   from shared memory. One warpgroup's conversion overlaps the other's tensor work.
// - The per-row scale is applied in the epilogue (the int8 values are exact in bf16), with the
//   optional SiLU-and-multiply for gate/up rows interleaved by 8 (sm90_bf16_interleave_gate_up):
//   rows gid and gid + 8 of a thread's 16-row slice are a gate/up pair.
// - Persistent: grid <= CTAS x #SMs (CTAS = 2 for token tiles <= 64, see W8Tile); CTA b walks items
//   b, b + grid, ...; an item is (expert, 128-row output tile, token tile), token tiles fastest, so
//   CTAs running together share a weight tile
//   through L2 when an expert has more than NTOK rows. The item list is derived on the device
//   from the offsets: the host never reads the routing and the launch is graph-safe.
// - SPLIT > 1 (launched in clusters of SPLIT CTAs at one CTA per SM, for launches with fewer items than SMs): the
//   CTAs of a cluster share each item, each a SPLIT-th of its k blocks, and rank 0 adds the others' accumulators
//   from its shared memory before the epilogue (cluster_split_k.cuh).
//
// Profile builds (kernels/scripts/w8_variants.sh, -DDK_W8_PROFILE=mask; wrong results, never shipped) leave
// parts of the work out to time the rest: 1 no token-tile loads, 2 no fragment loads or conversion, 4 no
// epilogue stores.
#pragma once
#ifndef DK_W8_PROFILE
#define DK_W8_PROFILE 0
#endif
#include <cuda_bf16.h>
#include "../common/sm90.cuh"
#include "cluster_split_k.cuh"
#include "expert_tiles.cuh"
#include "swapab_epilogue.cuh"
#include "swapab_producer.cuh"
#include "wgmma_rs_m64k16.cuh"

namespace dispatch {

// CTAS = CTAs per multiprocessor. Two CTAs (token tiles <= 64) run two independent rings per SM, so
// one CTA's conversion and tensor work overlap the other's waits: each consumer warpgroup alone runs
// a serial chain per stage (fragment loads -> conversion -> wgmma -> wait -> release) and, with both
// of a CTA's warpgroups on the same stage, one CTA per SM kept the memory pipe ~55-65% busy.
template <int NTOK, int CTAS = 1, int SPLIT = 1>
struct W8Tile {
  static constexpr int kRows = 128, kK = 128, kMaxExperts = 1024;
  // warps 0-7: the two consumer warpgroups (wgmma needs warpgroup-aligned warps); warp 8 produces
  static constexpr int kThreads = 288, kProducerWarp = 8;
  static constexpr int kWBytes = kRows * kK;         // int8
  static constexpr int kXBytes = NTOK * kK * 2;      // two boxes of NTOK x 64 bf16
  static constexpr int kStageBytes = kWBytes + kXBytes;  // multiple of 1024: stages stay aligned
  static constexpr int kStatic = (kMaxExperts + 1) * 4 + 2 * 16 * 8 + 64;  // s_prefix + barriers
  // 228 KB of shared memory per SM, 1 KB of it reserved per CTA; at most 227 KB for one CTA
  static constexpr int kSmemPerCta = CTAS == 1 ? 232448 : 233472 / CTAS - 1024;
  static constexpr int kScratchBytes = SplitScratch<NTOK, SPLIT>::kBytes;  // rank 0's partials of the other ranks
  static constexpr int kStagesFit = (kSmemPerCta - kStatic - kScratchBytes - 1024) / kStageBytes;
  static constexpr int kStages = kStagesFit > 12 ? 12 : kStagesFit;
  static constexpr int kSmemBytes = kStages * kStageBytes + kScratchBytes + 1024;  // + alignment slack
  static_assert(kStages >= 3, "the ring needs three stages");
  static_assert(kStageBytes % 1024 == 0, "stages must stay 1024-byte aligned");
};

// One int8 weight pair -> bf16x2 (lo = the lower k in the low half), exactly: two sign-extending
// byte loads from shared memory, int -> fp32 conversions, and the two fp32 upper halves packed (the
// values are small integers, so their bf16 is the upper half). Session 6 on the H200 (docs/kernels.md):
// 1.22x the kernel's throughput at Qwen3-30B-A3B T = 64 over the 2^23 magic number on a 16-bit load
// (an xor and three byte permutes per pair kept the ALU pipe, the kernel's busiest, 60% busy). Session 9: the
// magic form on the k + 8 pairs only (half the weights through each pipe) measured slower too (docs/kernels.md).
__device__ __forceinline__ uint32_t w8_s8_pair_to_bf16x2(uint32_t saddr) {
  int lo, hi;
  // volatile: the loads must stay after the stage's mbarrier wait (also volatile asm)
  asm volatile("ld.shared.s8 %0, [%1];" : "=r"(lo) : "r"(saddr));
  asm volatile("ld.shared.s8 %0, [%1+1];" : "=r"(hi) : "r"(saddr));
  return __byte_perm(__float_as_uint(__int2float_rn(lo)), __float_as_uint(__int2float_rn(hi)), 0x7632);
}

// Shared address of this thread's first fragment row: `tile` is the warpgroup's 64 rows of the
// 128B-swizzled int8 tile (16-byte chunk c of row r sits at c ^ (r & 7)); rows gid and gid + 8 (1 KB
// further) share r & 7 = gid.
__device__ __forceinline__ uint32_t w8_fragment_row(const uint8_t* tile, int warp_in_wg, int lane) {
  return sm90::smem_addr(tile + (16 * warp_in_wg + (lane >> 2)) * 128);
}

// The A fragment of k16 step s (4 registers) from the row address above.
__device__ __forceinline__ void w8_load_fragment(uint32_t (&a)[4], uint32_t r0, int s, int lane) {
  const int gid = lane >> 2, tig = lane & 3;
  const uint32_t p = r0 + ((s ^ gid) << 4) + 2 * tig;
  a[0] = w8_s8_pair_to_bf16x2(p);
  a[1] = w8_s8_pair_to_bf16x2(p + 8 * 128);
  a[2] = w8_s8_pair_to_bf16x2(p + 8);
  a[3] = w8_s8_pair_to_bf16x2(p + 8 * 128 + 8);
}

template <int NTOK, int CTAS, int SPLIT>
__global__ void __launch_bounds__(W8Tile<NTOK, CTAS, SPLIT>::kThreads, CTAS)
    sm90_w8a16_grouped_gemm_wgmma_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_w,
                                         const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                         const int* __restrict__ offsets, int E, int N, int K, int fuse_silu,
                                         int routing_ready) {
  using T = W8Tile<NTOK, CTAS, SPLIT>;
#ifdef DK_SWAPAB_NO_EARLY  // A/B build (w8_variants.sh): the early weight loads compiled out, routing_ready ignored
  routing_ready = 0;
#endif
  constexpr int ST = T::kStages;
  extern __shared__ uint8_t w8_smem_raw[];
  __shared__ __align__(8) uint64_t full[ST], empty[ST], split_full, split_free;
  __shared__ int s_prefix[T::kMaxExperts + 1];  // token tiles before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(w8_smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  swapab_prologue<NTOK, SPLIT>(full, empty, ST, &split_full, &split_free, &tm_x, &tm_w, offsets, E, s_prefix,
                               routing_ready != 0, tid, warp, lane);

  const int n_tiles = N / T::kRows;
  const int total = s_prefix[E] * n_tiles;
  // a cluster of SPLIT CTAs takes an item; this CTA its k blocks [kb0, kb1). The item walk reads blockIdx.x and
  // gridDim.x where it uses them: held in registers as variables, they cost the SPLIT = 1 kernels registers
  // (ptxas: 80 -> 77 for the 2-CTA W8A16 kernel at 16-token tiles) and changed their schedule.
  const int rank = SPLIT > 1 ? int(cluster::rank()) : 0;
  auto first_item = [] { return int(blockIdx.x) / SPLIT; };
  auto item_stride = [] { return int(gridDim.x) / SPLIT; };
  int kb0, kb1;
  split_k_range(K / T::kK, rank, SPLIT, kb0, kb1);
  // item w -> (expert, first row, end row, first output row of W)
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    expert_tile_decode<NTOK, T::kRows>(s_prefix, offsets, E, n_tiles, w, e, row0, row_end, n0);
  };
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
  auto weight_expert = [&](int e) { return (e + 1) % E; };
#else
  auto weight_expert = [](int e) { return e; };
#endif

  if (warp == T::kProducerWarp) {
    if (lane == 0) {
      auto tile = [&](int w, int& w_row, int& row0) {
        int e, row_end, n0;
        decode(w, e, row0, row_end, n0);
        w_row = weight_expert(e) * N + n0;
      };
      auto load = [&](int stage, int kb, int w_row, int row0, bool weights, bool tokens) {
        uint8_t* st = smem + stage * T::kStageBytes;
        if (weights) sm90::tma_load_2d(st, &tm_w, &full[stage], kb * T::kK, w_row);
#if !(DK_W8_PROFILE & 1)  // profile build: no token tile loads
        if (tokens) {
          sm90::tma_load_2d(st + T::kWBytes, &tm_x, &full[stage], kb * T::kK, row0);
          sm90::tma_load_2d(st + T::kWBytes + NTOK * 128, &tm_x, &full[stage], kb * T::kK + 64, row0);
        }
#endif
      };
      const uint32_t stage_bytes = (DK_W8_PROFILE & 1) ? T::kWBytes : T::kStageBytes;
      swapab_produce(first_item(), item_stride(), total, kb0, kb1, ST, full, empty, stage_bytes, routing_ready != 0,
                     tile, load);
    }
    return;
  }

  const int cw = wg, warp_in_wg = warp & 3;  // this warpgroup's 64 weight rows: cw * 64 ..
  float acc[NTOK / 2];
  uint32_t a[8][4];
  int stage = 0;
  uint32_t phase = 0, split_phase = 0;
  const uint8_t* scratch = smem + ST * T::kStageBytes;
  for (int w = first_item(); w < total; w += item_stride()) {
    int e, row0, row_end, n0;
    decode(w, e, row0, row_end, n0);
    for (int kb = kb0; kb < kb1; ++kb) {
      sm90::mbar_wait(&full[stage], phase);
      const uint8_t* st = smem + stage * T::kStageBytes;
      const uint32_t r0 = w8_fragment_row(st + cw * 64 * 128, warp_in_wg, lane);
      // one descriptor per stage: each step's offset added to the 14-bit address field (no carry: < 256 KB)
      const uint64_t d0 = sm90::desc_k_major_sw128(st + T::kWBytes);
      auto b_desc = [&](int s) { return d0 + uint64_t(((s >> 2) * NTOK * 128 + (s & 3) * 32) >> 4); };
#if DK_W8_PROFILE & 2  // profile build: no fragment loads or conversion
#pragma unroll
      for (int s = 0; s < 8; ++s)
#pragma unroll
        for (int i = 0; i < 4; ++i) a[s][i] = 0x3f803f80u ^ uint32_t(kb);
      (void)r0;
#else
#pragma unroll
      for (int s = 0; s < 8; ++s) w8_load_fragment(a[s], r0, s, lane);
#endif
      sm90::wgmma_fence();
#pragma unroll
      for (int s = 0; s < 8; ++s) sm90::wgmma_rs_m64k16<NTOK>(acc, a[s], b_desc(s), kb != kb0 || s != 0);
      sm90::wgmma_commit();
      // Wait for this block's wgmmas before the registers are rewritten: converting block kb + 1 while
      // they run (two register sets) made ptxas serialize every wgmma (C7513), so the overlap of
      // conversion and tensor work comes from the other consumer warpgroup instead.
      sm90::wgmma_wait<0>();
      if ((tid & 127) == 0) sm90::mbar_arrive(&empty[stage]);
      if (++stage == ST) stage = 0, phase ^= 1;
    }

#if DK_W8_PROFILE & 4  // profile build: no epilogue (a store never taken keeps the accumulators live)
    if constexpr (SPLIT == 1) {  // split launches keep their protocol (a rank must not wait for an unsent signal)
      if (acc[0] == -1234.5f && acc[NTOK / 2 - 1] == 1234.5f) Y[0] = __float2bfloat16_rn(acc[1]);
      continue;
    }
#endif
    if constexpr (SPLIT > 1) {
      if (rank != 0) {
        split_k_push<NTOK, SPLIT>(acc, scratch, &split_full, &split_free, split_phase, w == first_item(), rank, tid);
        continue;
      }
      split_k_reduce<NTOK, SPLIT>(acc, scratch, &split_full, split_phase, &split_free, w + item_stride() < total, tid);
    }
    // epilogue (swapab_epilogue.cuh): the per-row scales, then bf16 or silu(gate) * up
    const int n16 = n0 + cw * 64 + 16 * warp_in_wg;
    const float* sc = scales + size_t(weight_expert(e)) * N + n16 + (lane >> 2);
    swapab_store<NTOK>(acc, Y, row0, row_end, n16, N, __ldg(sc), __ldg(sc + 8), fuse_silu != 0, lane);
  }
}

}  // namespace dispatch
