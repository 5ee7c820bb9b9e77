// bf16 grouped GEMM for decode-sized batches on Hopper tensor cores, contiguous rows:
// Y[r, n] = sum_k X[r, k] * W[e, n, k] for the rows r of expert e (bf16 in, fp32 accumulate, bf16 out).
//
// Legend: M rows (grouped by expert, offsets[E+1]), E experts, N outputs, K inputs, NTOK tokens per tile.
//
// At a few to a few dozen rows per expert the weights are nearly every byte the GEMM moves, so, as in the
// W8A16 kernel (sm90_w8a16_grouped_gemm_wgmma.cuh), they take wgmma's A side (M = 64 weight rows per
// consumer warpgroup) and the tokens its N side (NTOK = 8-128), and the kernel is a TMA stream of weight tiles:
// - A stage is 128 weight rows x 64 k (16 KB, one 128B-swizzled TMA box) plus the matching NTOK x 64 token
//   tile (rows past the expert's belong to the next expert or lie past M, where TMA writes zeros; the
//   epilogue drops them). As many stages as fit (<= 16): ~190 KB of weights in flight per SM.
// - 2 consumer warpgroups (warps 0-7), each on 64 of the tile's 128 weight rows, run wgmma m64nNTOKk16 with
//   both operands in shared memory (nothing to convert, unlike int8) and keep one stage's MMAs in flight:
//   a stage is released when the next stage's MMAs have been issued and the previous ones retired.
// - One producer warp (one thread issues the loads). Persistent: grid <= CTAS x #SMs; CTA b walks items
//   b, b + grid, ...; an item is (expert, 128-row output tile, token tile), token tiles fastest, so CTAs
//   running together share a weight tile through L2 when an expert has more than NTOK rows. The item list
//   is derived on the device from the offsets: the host never reads the routing, the launch is graph-safe.
// - Epilogue: swapab_epilogue.cuh (plain bf16, or silu(gate) * up for gate/up rows interleaved by 8).
// - SPLIT > 1 (launched in clusters of SPLIT CTAs, for launches with fewer items than SMs): the CTAs of a cluster
//   share each item, each a SPLIT-th of its k blocks, and rank 0 adds the others' accumulators from its shared
//   memory before the epilogue (cluster_split_k.cuh).
// - routing_ready (down after gate|up): the first ring's weight tiles go out before griddepcontrol.wait
//   (swapab_producer.cuh).
#pragma once
#include <cuda_bf16.h>
#include "../common/sm90.cuh"
#include "cluster_split_k.cuh"
#include "expert_tiles.cuh"
#include "swapab_epilogue.cuh"
#include "swapab_producer.cuh"
#include "wgmma_ss_m64k16.cuh"

namespace dispatch {

template <int NTOK, int CTAS = 1, int SPLIT = 1>
struct SwapAbTile {
  static constexpr int kRows = 128, kK = 64, kMaxExperts = 1024;
  static constexpr int kThreads = 288, kProducerWarp = 8;  // warps 0-7 consume, warp 8 produces
  static constexpr int kWBytes = kRows * kK * 2;            // one 128B-swizzled box
  static constexpr int kXBytes = NTOK * kK * 2;
  static constexpr int kStageBytes = kWBytes + kXBytes;     // multiple of 1024: stages stay aligned
  static constexpr int kMaxStages = 16;
  static constexpr int kStatic = (kMaxExperts + 1) * 4 + 2 * kMaxStages * 8 + 64;  // s_prefix + barriers
  // 228 KB of shared memory per SM, 1 KB of it reserved per CTA; at most 227 KB for one CTA
  static constexpr int kSmemPerCta = CTAS == 1 ? 232448 : 233472 / CTAS - 1024;
  static constexpr int kScratchBytes = SplitScratch<NTOK, SPLIT>::kBytes;  // rank 0's partials of the other ranks
  static constexpr int kStagesFit = (kSmemPerCta - kStatic - kScratchBytes - 1024) / kStageBytes;
  static constexpr int kStages = kStagesFit > kMaxStages ? kMaxStages : kStagesFit;
  static constexpr int kSmemBytes = kStages * kStageBytes + kScratchBytes + 1024;  // + alignment slack
  static_assert(kStages >= 3, "the ring needs three stages");
  static_assert(kStageBytes % 1024 == 0, "stages must stay 1024-byte aligned");
};

template <int NTOK, int CTAS, int SPLIT>
__global__ void __launch_bounds__(SwapAbTile<NTOK, CTAS, SPLIT>::kThreads, CTAS)
    sm90_bf16_grouped_gemm_swapab_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_w,
                                         __nv_bfloat16* __restrict__ Y, const int* __restrict__ offsets, int E, int N,
                                         int K, int fuse_silu, int routing_ready) {
  using T = SwapAbTile<NTOK, CTAS, SPLIT>;
#ifdef DK_SWAPAB_NO_EARLY  // A/B build (w8_variants.sh): the early weight loads compiled out, routing_ready ignored
  routing_ready = 0;
#endif
  constexpr int ST = T::kStages;
  extern __shared__ uint8_t swapab_smem_raw[];
  __shared__ __align__(8) uint64_t full[ST], empty[ST], split_full, split_free;
  __shared__ int s_prefix[T::kMaxExperts + 1];  // token tiles before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(swapab_smem_raw) + 1023) & ~uintptr_t(1023));
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
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    expert_tile_decode<NTOK, T::kRows>(s_prefix, offsets, E, n_tiles, w, e, row0, row_end, n0);
  };

  if (warp == T::kProducerWarp) {
    if (lane == 0) {
      auto tile = [&](int w, int& w_row, int& row0) {
        int e, row_end, n0;
        decode(w, e, row0, row_end, n0);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
        w_row = ((e + 1) % E) * N + n0;
#else
        w_row = e * N + n0;
#endif
      };
      auto load = [&](int stage, int kb, int w_row, int row0, bool weights, bool tokens) {
        uint8_t* st = smem + stage * T::kStageBytes;
        if (weights) sm90::tma_load_2d(st, &tm_w, &full[stage], kb * T::kK, w_row);
        if (tokens) sm90::tma_load_2d(st + T::kWBytes, &tm_x, &full[stage], kb * T::kK, row0);
      };
      swapab_produce(first_item(), item_stride(), total, kb0, kb1, ST, full, empty, T::kStageBytes, routing_ready != 0,
                     tile, load);
    }
    return;
  }

  const int cw = wg, warp_in_wg = warp & 3;  // this warpgroup's 64 weight rows: cw * 64 ..
  float acc[NTOK / 2];
  int stage = 0;
  uint32_t phase = 0, split_phase = 0;
  const uint8_t* scratch = smem + ST * T::kStageBytes;
  for (int w = first_item(); w < total; w += item_stride()) {
    int e, row0, row_end, n0;
    decode(w, e, row0, row_end, n0);
    int prev = -1;
    for (int kb = kb0; kb < kb1; ++kb) {
      sm90::mbar_wait(&full[stage], phase);
      const uint8_t* st = smem + stage * T::kStageBytes;
      // k16 step s is 32 bytes into each 128-byte swizzled row: +2 in the descriptor's address field (no
      // carry: the shared window is < 256 KB)
      const uint64_t da = sm90::desc_k_major_sw128(st + cw * 64 * 128);
      const uint64_t db = sm90::desc_k_major_sw128(st + T::kWBytes);
      sm90::wgmma_fence();
#pragma unroll
      for (int s = 0; s < T::kK / 16; ++s) sm90::wgmma_ss_m64k16<NTOK>(acc, da + 2 * s, db + 2 * s, kb != kb0 || s != 0);
      sm90::wgmma_commit();
      sm90::wgmma_wait<1>();  // the previous stage's MMAs are done: release it
      if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);
      prev = stage;
      if (++stage == ST) stage = 0, phase ^= 1;
    }
    sm90::wgmma_wait<0>();
    if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);
    if constexpr (SPLIT > 1) {
      if (rank != 0) {
        split_k_push<NTOK, SPLIT>(acc, scratch, &split_full, &split_free, split_phase, w == first_item(), rank, tid);
        continue;
      }
      split_k_reduce<NTOK, SPLIT>(acc, scratch, &split_full, split_phase, &split_free, w + item_stride() < total, tid);
    }
    swapab_store<NTOK>(acc, Y, row0, row_end, n0 + cw * 64 + 16 * warp_in_wg, N, 1.f, 1.f, fuse_silu != 0, lane);
  }
}

}  // namespace dispatch
