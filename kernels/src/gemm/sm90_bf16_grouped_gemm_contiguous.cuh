// Prefill grouped GEMM on Hopper: Y[r, n] = sum_k X[r, k] * W[e, n, k] for the rows r of expert e.
//
// Legend: M rows (grouped by expert, offsets[E+1]), E experts, N outputs, K inputs.
// Tile 128 (rows) x 256 (outputs) x 64 (k), 4-stage TMA ring in 128B-swizzled shared memory.
// 3 warpgroups, warp-specialized: WG0 is the producer (one thread issues TMA loads, its registers
// shrink to 40 with setmaxnreg); WG1 and WG2 are consumers, each running wgmma m64n256k16 on
// 64 of the tile's rows with 128 fp32 accumulators per thread (registers grow to 232).
// Persistent: grid = #SMs. The tile list is derived on the device from the offsets (per expert
// ceil(rows/128) row tiles), so groups need no alignment and the host never reads the routing.
// Each CTA takes tiles blockIdx.x, +gridDim.x, ... (static), or, with a scheduler slot (`sched`, two
// ints that are 0 at launch), the next tile of the list from an atomic counter as its producer
// needs one (dynamic): the tiles in flight then stay a window of consecutive tiles even when tiles
// differ in cost (half tails), so the row tiles sharing a weight tile still run together and read
// it from L2. The producer hands each tile's index to the consumers in a per-stage slot written
// before the stage's first arrival; -1 ends the CTA. The last producer to finish zeroes the slot.
// A row tile may run past its expert's rows into the next expert's rows (or past M, which TMA fills
// with zeros); the epilogue drops those.
// kStaged picks the epilogue (sm90_bf16_grouped_gemm_contiguous_epilogue.cuh): false writes from
// the registers (the old one), true stages each warpgroup's rows through its own 8 KB of shared memory
// after the ring and writes 16-byte pieces of whole rows. epi_flags (staged only): bit 0 stores the chunks whose rows
// are all the expert's with TMA through tm_y (Y as [M, N] or, with fuse_silu, [M, N / 2]; 64 x 64 boxes, 128B
// swizzle), bit 1 stages with stmatrix.
// Half tails (half_tails != 0): an expert's last row tile with at most 64 rows is a 64 x 256 tile whose
// two halves of 128 outputs the two consumer warpgroups take (wgmma m64n128k16 on the same 64 rows of A),
// so it costs half a tile instead of a whole one with 64-127 rows of padding. Uniform routing leaves such
// a tail on about half the experts (Qwen3-30B-A3B at 4,096 tokens: 256 +- 16 rows each, 2.5 row tiles on
// average where 2 hold the rows). The producer loads the same boxes either way.
// Swapped tails (kSwapTails; g_contig_swap_tails, the rule in contig_plan.h): an expert's rows past its whole tiles,
// when at most 32, run with the operands swapped, the weight tile as wgmma's A (M = 64 outputs at a time) and the
// tail's tokens as its N (16 or 32), so they cost a 16- or 32-wide MMA instead of a 64- or 128-row tile of padding.
// Such a tail joins the expert's last whole tile (a tile of 129-160 rows: its 128 rows as usual, the tail swapped on
// the same weight stages), or is a tile of its own when the expert has fewer than 33 rows (no 128-row box loaded);
// expert_tiles.cuh's swap_slice says which rows a tile takes. Each stage then holds a third box, the tail's 32 x 64
// tokens (tm_xt), and the expert prefix shrinks to 384 experts to fit (ContigSwapTile). Both warpgroups take their 128
// of the tile's 256 outputs, two 64-output MMAs each; the tail's rows leave through swapab_store (2-byte stores of
// each token's outputs, as the decode kernels').
#pragma once
#include <cuda_bf16.h>
#include <type_traits>
#include "../common/sm90.cuh"
#include "expert_tiles.cuh"
#include "sm90_bf16_grouped_gemm_contiguous_epilogue.cuh"
#include "swapab_epilogue.cuh"
#include "wgmma_m64n256k16.cuh"
#include "wgmma_ss_m64k16.cuh"

namespace dispatch {

struct ContigTile : TmaRingTile<128, 256, 4> {
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack
  // + one staging buffer per consumer warpgroup (staged epilogue): 214,016 bytes + 4,176 static of 232,448
  static constexpr int kSmemBytesStaged = kSmemBytes + 2 * kEpiBytes;
};

// The ring of the kernel with swapped tails: each stage adds the tail's 32 x 64 tokens (4 KB), and the prefix holds
// 384 experts, so that the ring (4 x 52 KB), the staging buffers and the static arrays fit 227 KB.
struct ContigSwapTile : ContigTile {
  static constexpr int kTailRows = 32;
  static constexpr int kTBytes = kTailRows * kK * 2;
  static constexpr int kStageBytes = ContigTile::kStageBytes + kTBytes;
  static constexpr int kMaxExperts = 384;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;
  static constexpr int kSmemBytesStaged = kSmemBytes + 2 * kEpiBytes;  // 230,400 + 1,620 static of 232,448
  static_assert(kSmemBytesStaged + (kMaxExperts + 1) * 4 + 2 * kStages * 8 + kStages * 4 <= 232448, "227 KB");
  static_assert(kStageBytes % 1024 == 0, "stages must stay 1024-byte aligned");
};

template <bool kStaged, bool kSwapTails = false>
__global__ void __launch_bounds__(ContigTile::kThreads, 1)
    sm90_bf16_grouped_gemm_contiguous_kernel(const __grid_constant__ CUtensorMap tm_x,
                                             const __grid_constant__ CUtensorMap tm_w,
                                             const __grid_constant__ CUtensorMap tm_y,
                                             const __grid_constant__ CUtensorMap tm_xt,
                                             __nv_bfloat16* __restrict__ Y, const int* __restrict__ offsets,
                                             int E, int N, int K, int fuse_silu, int half_tails,
                                             int* __restrict__ sched, int epi_flags) {
  using T = std::conditional_t<kSwapTails, ContigSwapTile, ContigTile>;
  constexpr int kSwap = kSwapTails ? ContigSwapTile::kTailRows : 0;  // the most rows a swapped tail takes
  constexpr int kTBytes = kSwapTails ? ContigSwapTile::kTBytes : 0;
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[T::kStages], empty[T::kStages];
  __shared__ int s_prefix[T::kMaxExperts + 1];  // row tiles before expert e
  __shared__ int s_item[T::kStages];             // dynamic schedule: the tile whose first k-block is in the stage

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  if (tid == 0) tma_ring_init(full, empty, T::kStages, &tm_x, &tm_w);  // reads nothing of the previous kernel's
  const CUtensorMap* ty = kStaged && (epi_flags & 1) ? &tm_y : nullptr;  // the epilogue's TMA stores, if any
  const bool stm = (epi_flags & 2) != 0;
  if (tid == 0 && ty) sm90::tma_prefetch_desc(ty);
  if (kSwapTails && tid == 0) sm90::tma_prefetch_desc(&tm_xt);
  pdl_trigger();
  pdl_wait();  // offsets and X come from the previous kernel

  if (warp == 0) expert_tile_prefix<T::kM, kSwap>(offsets, E, s_prefix, lane);
  __syncthreads();

  const int n_tiles = (N + T::kN - 1) / T::kN;
  const int total = s_prefix[E] * n_tiles;
  const int k_blocks = (K + T::kK - 1) / T::kK;
  // Tile w -> (expert, first row, end row, first output). Inside an expert the row tiles vary
  // fastest: CTAs running together share each weight tile through L2 (the expert's rows are few
  // megabytes and stay in L2), so weights stream from HBM about once per launch.
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    expert_tile_decode<T::kM, T::kN>(s_prefix, offsets, E, n_tiles, w, e, row0, row_end, n0);
  };

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    if (tid == 0) {
      int stage = 0;
      uint32_t phase = 0;
      // dynamic: the next tile is fetched one tile ahead, so the atomic's latency hides behind a tile's loads
      int next = sched ? atomicAdd(sched, 1) : blockIdx.x;
      for (;;) {
        const int w = next;
        if (w >= total) break;
        next = sched ? atomicAdd(sched, 1) : w + gridDim.x;
        int e, row0, row_end, n0;
        decode(w, e, row0, row_end, n0);
        // swapped tails: a tail alone takes only the tail box, a whole tile with swapped rows both boxes
        SwapSlice sl{0, 0, 0, false};
        if constexpr (kSwapTails) sl = swap_slice<T::kM, kSwap>(__ldg(offsets + e), row0, row_end);
        const bool x_box = !sl.alone, t_box = sl.width > 0;
        const int t_row = sl.row0;
        const uint32_t bytes = T::kBBytes + (x_box ? T::kABytes : 0) + (t_box ? kTBytes : 0);
        for (int kb = 0; kb < k_blocks; ++kb) {
          sm90::mbar_wait(&empty[stage], phase ^ 1);
          if (sched && kb == 0) s_item[stage] = w;  // visible to the consumers through the arrival below
          sm90::mbar_expect_tx(&full[stage], bytes);
          uint8_t* sa = smem + stage * T::kStageBytes;
          if (x_box) sm90::tma_load_2d(sa, &tm_x, &full[stage], kb * T::kK, row0);
          if (kSwapTails && t_box)
            sm90::tma_load_2d(sa + T::kABytes + T::kBBytes, &tm_xt, &full[stage], kb * T::kK, t_row);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
          const int e_w = (e + 1) % E;
#else
          const int e_w = e;
#endif
          sm90::tma_load_2d(sa + T::kABytes, &tm_w, &full[stage], kb * T::kK, e_w * N + n0);
          if (++stage == T::kStages) stage = 0, phase ^= 1;
        }
      }
      if (sched) {
        sm90::mbar_wait(&empty[stage], phase ^ 1);  // the end: a stage with no data, item -1
        s_item[stage] = -1;
        sm90::mbar_arrive(&full[stage]);
        __threadfence();  // this CTA's fetches come before its count; the last CTA to count zeroes the slot
        if (atomicAdd(sched + 1, 1) == int(gridDim.x) - 1) sched[0] = 0, sched[1] = 0;
      }
    }
  } else {
    sm90::setmaxnreg_inc<232>();
    const int cw = wg - 1;  // this warpgroup's 64 rows: cw*64 ..
    float acc[128];
    float acc_t[2][16];  // swapped tails: outputs cw * 128 + 64 j .. (+64) x the tail's tokens (16 or 32)
    int stage = 0;
    uint32_t phase = 0;
    for (int w_static = blockIdx.x;; w_static += gridDim.x) {
      int w = w_static;
      if (sched) {
        sm90::mbar_wait(&full[stage], phase);  // the tile's first stage (the k-loop below waits on it again)
        w = s_item[stage];
        if (w < 0) break;
      } else if (w >= total) {
        break;
      }
      int e, row0, row_end, n0;
      decode(w, e, row0, row_end, n0);
      // the same for the whole CTA (both warpgroups take the same tile); the votes tell ptxas they are warp-uniform
      SwapSlice sl{0, 0, 0, false};
      if constexpr (kSwapTails) sl = swap_slice<T::kM, kSwap>(__ldg(offsets + e), row0, row_end);
      const bool alone = kSwapTails && __all_sync(0xffffffffu, sl.alone);  // a swapped tail, no 128-row part
      const bool merged = kSwapTails && !alone && __all_sync(0xffffffffu, sl.width > 0);  // a whole tile + its tail
      const bool half = !alone && __all_sync(0xffffffffu, half_tails != 0 && row_end - row0 <= 64);
      // One k-loop per tile shape, the branch around whole loops: ptxas injects warpgroup fences where wgmmas of
      // different shapes on the same accumulators meet inside a loop. kMain: 0 none (a tail alone), 1 half, 2 whole;
      // kSwapN: the swapped tail's MMA width (0: no tail).
      auto mainloop = [&](auto main_tag, auto swap_tag) {
        constexpr int kMain = decltype(main_tag)::value, kSwapN = decltype(swap_tag)::value;
        constexpr bool kHalf = kMain == 1;
        int prev = -1;
        for (int kb = 0; kb < k_blocks; ++kb) {
          sm90::mbar_wait(&full[stage], phase);
          const uint8_t* stage_base = smem + stage * T::kStageBytes;
          sm90::wgmma_fence();
          // Per 16-wide k step: the tile's MMA, then the swapped tail's two (one per 64 of the warpgroup's outputs),
          // so each small MMA's wait on the previous one of its chain overlaps a whole-tile MMA. Issued after the
          // tile's four instead, a tail of <= 16 rows cost up to 0.49 of a tile beside another whole tile, 0.37 now
          // (session 22, tail_probe.py).
#pragma unroll
          for (int k = 0; k < T::kK / 16; ++k) {
            if constexpr (kMain == 2) {
              const uint8_t* sa = stage_base + cw * (64 * T::kK * 2);
              const uint8_t* sb = stage_base + T::kABytes;
              sm90::wgmma_m64n256k16_bf16(acc, sm90::desc_k_major_sw128(sa + k * 32),
                                          sm90::desc_k_major_sw128(sb + k * 32), (kb | k) != 0);
            } else if constexpr (kHalf) {  // rows 0-63 of A, this warpgroup's 128 of the 256 outputs
              float(&acc_half)[64] = *reinterpret_cast<float(*)[64]>(acc);
              const uint8_t* sb = stage_base + T::kABytes + cw * (128 * T::kK * 2);
              sm90::wgmma_ss_m64k16<128>(acc_half, sm90::desc_k_major_sw128(stage_base + k * 32),
                                         sm90::desc_k_major_sw128(sb + k * 32), (kb | k) != 0);
            }
            if constexpr (kSwapN > 0) {  // A: 64 of the weight tile's rows (128-byte rows, K-major), B: the tail box
              const uint8_t* st = stage_base + T::kABytes + T::kBBytes;
#pragma unroll
              for (int j = 0; j < 2; ++j) {
                float(&acc_j)[kSwapN / 2] = *reinterpret_cast<float(*)[kSwapN / 2]>(acc_t[j]);
                const uint8_t* sw = stage_base + T::kABytes + (cw * 128 + j * 64) * (T::kK * 2);
                sm90::wgmma_ss_m64k16<kSwapN>(acc_j, sm90::desc_k_major_sw128(sw + k * 32),
                                              sm90::desc_k_major_sw128(st + k * 32), (kb | k) != 0);
              }
            }
          }
          sm90::wgmma_commit();
          sm90::wgmma_wait<1>();  // the previous k-block's MMAs are done: release its stage
          if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);
          prev = stage;
          if (++stage == T::kStages) stage = 0, phase ^= 1;
        }
        sm90::wgmma_wait<0>();
        if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);
      };
      using I0 = std::integral_constant<int, 0>;
      using I1 = std::integral_constant<int, 1>;
      using I2 = std::integral_constant<int, 2>;
      using N16 = std::integral_constant<int, 16>;
      using N32 = std::integral_constant<int, 32>;
      const bool narrow = __all_sync(0xffffffffu, sl.width == 16);
      if (kSwapTails && alone) {
        if (narrow) mainloop(I0{}, N16{}); else mainloop(I0{}, N32{});
      } else if (kSwapTails && merged) {
        if (narrow) mainloop(I2{}, N16{}); else mainloop(I2{}, N32{});
      } else if (half) {
        mainloop(I1{}, I0{});
      } else {
        mainloop(I2{}, I0{});
      }

      if (Y == nullptr) continue;  // benchmark knob (g_contig_epilogue 2): the MMAs alone, nothing written
      if (kSwapTails && (alone || merged)) {  // the tail's rows: a thread holds outputs n16 + gid (+ 8) of its tokens
        const int trow0 = sl.row0, tend = sl.row0 + sl.rows;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int n16 = n0 + cw * 128 + j * 64 + 16 * (warp & 3);
          if (n16 >= N) continue;  // N is a multiple of 16: a thread's 16 outputs are all in or all out
          if (narrow)
            swapab_store<16>(*reinterpret_cast<const float(*)[8]>(acc_t[j]), Y, trow0, tend, n16, N, 1.f, 1.f,
                             fuse_silu != 0, lane);
          else
            swapab_store<32>(acc_t[j], Y, trow0, tend, n16, N, 1.f, 1.f, fuse_silu != 0, lane);
        }
        if (alone) continue;
      }
      // the warpgroup's rows and outputs: 64 rows x 256 of a whole tile, or 64 x 128 of a half one
      const int row_base = half ? row0 : row0 + cw * 64;
      const int col0 = half ? n0 + cw * 128 : n0;
      const int width = half ? 128 : 256;
      if constexpr (kStaged) {
        uint8_t* buf = smem + T::kStages * T::kStageBytes + cw * kEpiBytes;
        const int t = tid & 127;
        if (!fuse_silu)
          contig_epilogue_staged<false>(acc, buf, 1 + cw, Y, row_base, row_end, col0, N, width, t, ty, stm);
        else
          contig_epilogue_staged<true>(acc, buf, 1 + cw, Y, row_base, row_end, col0 / 2, N / 2, width, t, ty, stm);
      } else {
        const int r = row_base + (warp & 3) * 16 + (lane >> 2);
        contig_epilogue_direct(acc, Y, r, col0, row_end, N, width, lane, fuse_silu != 0);
      }
    }
    contig_epilogue_drain(ty, tid & 127);
  }
}

}  // namespace dispatch
