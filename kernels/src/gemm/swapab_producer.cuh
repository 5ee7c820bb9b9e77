// What the swap-AB GEMMs (bf16 and W8A16) share around their ring: the prologue (swapab_prologue) and the producer
// thread (swapab_produce): this CTA's (item, k block) pairs in order, one ring stage each, with the weight tile and
// the token tile of a pair on the stage's full barrier.
//
// routing_ready (the caller's routing_ready_before_wait: the routing was written two or more kernels back, as for
// a MoE layer's down projection, whose input comes from gate|up but whose routing comes from the kernel before
// that): the kernel skipped its griddepcontrol.wait at the top, and here the weight tiles of the first item's first
// ring of k blocks go out before the wait (weights are never written) and their token tiles after it. Launched with
// PDL, such a CTA can fill its ring while the previous kernel's last CTAs finish. Without routing_ready the kernel
// waited already.
//
// tile(w, w_row, row0): item w's first weight row (of the [E * N, K] weight map) and first token row.
// load(stage, kb, w_row, row0, weights, tokens): the stage's TMA loads of k block kb, weights and/or tokens.
#pragma once
#include "../common/sm90.cuh"
#include "cluster_split_k.cuh"
#include "expert_tiles.cuh"

namespace dispatch {

// Both swap-AB kernels' prologue: thread 0 initialises the ring's barriers (and the split ones) and prefetches the
// tensor maps before any wait (it reads nothing the previous kernels write); without routing_ready every thread then
// waits for the previous kernel (with it, swapab_produce waits, before the token tiles); warp 0 builds the expert
// prefix; the CTA, and with SPLIT > 1 the cluster, synchronise (every CTA's barriers initialised before any remote
// arrival).
template <int NTOK, int SPLIT>
__device__ __forceinline__ void swapab_prologue(uint64_t* full, uint64_t* empty, int stages, uint64_t* split_full,
                                                uint64_t* split_free, const CUtensorMap* tm_x, const CUtensorMap* tm_w,
                                                const int* offsets, int E, int* s_prefix, bool routing_ready, int tid,
                                                int warp, int lane) {
  if (tid == 0) {
    if constexpr (SPLIT > 1) split_k_init<SPLIT>(split_full, split_free);
    tma_ring_init(full, empty, stages, tm_x, tm_w);
  }
  if (!routing_ready) {
    pdl_wait();  // offsets and X come from the previous kernels
    pdl_trigger();
  }
  if (warp == 0) expert_tile_prefix<NTOK>(offsets, E, s_prefix, lane);
  __syncthreads();
  if constexpr (SPLIT > 1) cluster::sync();
}

template <typename Tile, typename Load>
__device__ __forceinline__ void swapab_produce(int first, int stride, int total, int kb0, int kb1, int ring,
                                               uint64_t* full, uint64_t* empty, uint32_t stage_bytes,
                                               bool routing_ready, Tile tile, Load load) {
  int early = 0;  // k blocks of the first item whose weight tiles went out before the wait (at most one ring)
  if (routing_ready) {
    int w_row = 0, row0 = 0;
    if (first < total) {
      tile(first, w_row, row0);
      early = kb1 - kb0 < ring ? kb1 - kb0 : ring;
    }
#pragma unroll 1
    for (int j = 0; j < early; ++j) {
      sm90::mbar_expect_tx(&full[j], stage_bytes);
      load(j, kb0 + j, w_row, row0, true, false);
    }
    pdl_wait();  // the token tiles come from the previous kernel
    pdl_trigger();
#pragma unroll 1
    for (int j = 0; j < early; ++j) load(j, kb0 + j, w_row, row0, false, true);
  }
  int stage = early == ring ? 0 : early, skip = early;
  uint32_t phase = early == ring ? 1 : 0;
  for (int w = first; w < total; w += stride) {
    int w_row, row0;
    tile(w, w_row, row0);
    for (int kb = kb0; kb < kb1; ++kb) {
      if (skip > 0) {
        --skip;
        continue;
      }
      sm90::mbar_wait(&empty[stage], phase ^ 1);
      sm90::mbar_expect_tx(&full[stage], stage_bytes);
      load(stage, kb, w_row, row0, true, true);
      if (++stage == ring) stage = 0, phase ^= 1;
    }
  }
}

}  // namespace dispatch
