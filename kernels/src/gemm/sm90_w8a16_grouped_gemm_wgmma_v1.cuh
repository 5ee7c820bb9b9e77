// W8A16 grouped GEMM on Hopper tensor cores, variant 1 (g_w8_wgmma_variant = 1): the same tiles, ring,
// item order, conversion, scales and epilogue as sm90_w8a16_grouped_gemm_wgmma.cuh (variant 0; read its
// header first), with the consumer's chain per ring stage software-pipelined so that a warpgroup's own
// conversion overlaps its own tensor work:
// - per k16 step s of a 128-k block: convert a[s] (4 registers of its own), wgmma.fence, issue the
//   wgmma on a[s], commit. Step s's wgmma runs while step s + 1 converts; every register a wgmma
//   reads is written before that wgmma's fence and never again until the block's wait<0>, so the
//   conversion is not "between start and end" of a wgmma pipeline stage for ptxas (no C7513).
// - the 32 raw 16-bit weight words of the NEXT ring stage are loaded from shared memory into their own
//   registers (raw[], never a wgmma operand) after this block's last wgmma is issued and before its
//   wait<0>: the full barrier of the next stage is waited there, so the shared-memory latency of the
//   next block hides behind this block's tensor work, and the block starts with its bytes in registers.
// With NC = 1, the same results bit for bit as variant 0: the same bf16 operands in the same k order into
// the same wgmma accumulation chain. Variant 2 (g_w8_wgmma_variant = 2) is this kernel with NC
// independent accumulator chains at token tiles of 16 (NC = 4) and 32 (NC = 2): with 16-32 tokens a
// wgmma is a few tensor-core cycles, so eight dependent ones per block are latency, not throughput
// (variant 1 gained only 5-11% over 0 at those tiles on the H200, and a variant that halved the
// conversion instructions gained the same: docs/kernels.md). Sums in another order than variant 0.
#pragma once
#include "sm90_w8a16_grouped_gemm_wgmma.cuh"

namespace dispatch {

// This thread's 32 raw 16-bit words of one 128-k block (w8_load_fragments without the conversion).
__device__ __forceinline__ void w8_load_raw(uint32_t (&raw)[8][4], const uint8_t* tile, int warp_in_wg, int lane) {
  const int gid = lane >> 2, tig = lane & 3;
  const uint8_t* r0 = tile + (16 * warp_in_wg + gid) * 128;
  const uint8_t* r1 = r0 + 8 * 128;
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const int off = ((s ^ gid) << 4) + 2 * tig;
    raw[s][0] = *reinterpret_cast<const uint16_t*>(r0 + off);
    raw[s][1] = *reinterpret_cast<const uint16_t*>(r1 + off);
    raw[s][2] = *reinterpret_cast<const uint16_t*>(r0 + off + 8);
    raw[s][3] = *reinterpret_cast<const uint16_t*>(r1 + off + 8);
  }
}

template <int NTOK, int NC = 1>
__global__ void __launch_bounds__(W8Tile<NTOK>::kThreads, 1)
    sm90_w8a16_grouped_gemm_wgmma_v1_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_w,
                                            const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                            const int* __restrict__ offsets, int E, int N, int K, int fuse_silu) {
  using T = W8Tile<NTOK>;
  constexpr int ST = T::kStages;
  extern __shared__ uint8_t w8_smem_raw[];
  __shared__ __align__(8) uint64_t full[ST], empty[ST];
  __shared__ int s_prefix[T::kMaxExperts + 1];  // token tiles before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(w8_smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  pdl_wait();  // offsets and X come from the previous kernels
  pdl_trigger();

  if (warp == 0) {
    int running = 0;
    if (lane == 0) s_prefix[0] = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      int v = e < E ? (__ldg(offsets + e + 1) - __ldg(offsets + e) + NTOK - 1) / NTOK : 0;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (e < E) s_prefix[e + 1] = running + v;
      running += __shfl_sync(0xffffffffu, v, 31);
    }
    if (lane == 0) {
      for (int s = 0; s < ST; ++s) {
        sm90::mbar_init(&full[s], 1);
        sm90::mbar_init(&empty[s], 2);  // one arrival per consumer warpgroup
      }
      sm90::mbar_fence_init();
      sm90::tma_prefetch_desc(&tm_x);
      sm90::tma_prefetch_desc(&tm_w);
    }
  }
  __syncthreads();

  const int n_tiles = N / T::kRows;
  const int total = s_prefix[E] * n_tiles;
  const int k_blocks = K / T::kK;
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    int lo = 1, hi = E;  // first idx in [1, E] with s_prefix[idx] * n_tiles > w
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (s_prefix[mid] * n_tiles > w) hi = mid; else lo = mid + 1;
    }
    e = lo - 1;
    const int m_tiles = s_prefix[e + 1] - s_prefix[e];
    const int local = w - s_prefix[e] * n_tiles;
    n0 = (local / m_tiles) * T::kRows;
    row0 = __ldg(offsets + e) + (local % m_tiles) * NTOK;
    row_end = __ldg(offsets + e + 1);
  };
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
  auto weight_expert = [&](int e) { return (e + 1) % E; };
#else
  auto weight_expert = [](int e) { return e; };
#endif

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    if (tid == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int w = blockIdx.x; w < total; w += gridDim.x) {
        int e, row0, row_end, n0;
        decode(w, e, row0, row_end, n0);
        const int w_row = weight_expert(e) * N + n0;
        for (int kb = 0; kb < k_blocks; ++kb) {
          sm90::mbar_wait(&empty[stage], phase ^ 1);
          sm90::mbar_expect_tx(&full[stage], T::kStageBytes);
          uint8_t* st = smem + stage * T::kStageBytes;
          sm90::tma_load_2d(st, &tm_w, &full[stage], kb * T::kK, w_row);
          sm90::tma_load_2d(st + T::kWBytes, &tm_x, &full[stage], kb * T::kK, row0);
          sm90::tma_load_2d(st + T::kWBytes + NTOK * 128, &tm_x, &full[stage], kb * T::kK + 64, row0);
          if (++stage == ST) stage = 0, phase ^= 1;
        }
      }
    }
    return;
  }

  sm90::setmaxnreg_inc<232>();
  const int cw = wg - 1, warp_in_wg = warp & 3;  // this warpgroup's 64 weight rows: cw * 64 ..
  const int w_off = cw * 64 * 128;               // their bytes in a stage
  static_assert(NC == 1 || NC == 2 || NC == 4, "1, 2 or 4 accumulator chains");
  float acc[NC][NTOK / 2];  // k16 step s accumulates into chain s % NC; the chains are summed per item
  uint32_t raw[8][4], a[8][4];
  int stage = 0;
  uint32_t phase = 0;
  if (blockIdx.x < total) {  // the first block's bytes; later blocks' come in during the previous block
    sm90::mbar_wait(&full[0], 0);
    w8_load_raw(raw, smem + w_off, warp_in_wg, lane);
  }
  for (int w = blockIdx.x; w < total; w += gridDim.x) {
    int e, row0, row_end, n0;
    decode(w, e, row0, row_end, n0);
    const bool more_items = w + int(gridDim.x) < total;
    for (int kb = 0; kb < k_blocks; ++kb) {
      const uint8_t* sx = smem + stage * T::kStageBytes + T::kWBytes;
#pragma unroll
      for (int s = 0; s < 8; ++s) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[s][i] = w8_pair_to_bf16x2(raw[s][i]);
        sm90::wgmma_fence();
        sm90::wgmma_rs_m64k16<NTOK>(acc[s % NC], a[s],
                                    sm90::desc_k_major_sw128(sx + (s >> 2) * NTOK * 128 + (s & 3) * 32),
                                    kb != 0 || s >= NC);
        sm90::wgmma_commit();
      }
      const int next = stage + 1 == ST ? 0 : stage + 1;
      const uint32_t next_phase = stage + 1 == ST ? phase ^ 1 : phase;
      if (kb + 1 < k_blocks || more_items) {  // next block's bytes while this block's wgmmas run
        sm90::mbar_wait(&full[next], next_phase);
        w8_load_raw(raw, smem + next * T::kStageBytes + w_off, warp_in_wg, lane);
      }
      sm90::wgmma_wait<0>();
      if ((tid & 127) == 0) sm90::mbar_arrive(&empty[stage]);
      stage = next, phase = next_phase;
    }

    // epilogue: as variant 0, after summing the chains in a fixed order
#pragma unroll
    for (int c = 1; c < NC; ++c)
#pragma unroll
      for (int i = 0; i < NTOK / 2; ++i) acc[0][i] += acc[c][i];
    const int gid = lane >> 2, tig = lane & 3;
    const int n_row = n0 + cw * 64 + 16 * warp_in_wg + gid;
    const float* sc = scales + size_t(weight_expert(e)) * N + n_row;
    const float s_lo = __ldg(sc), s_hi = __ldg(sc + 8);
#pragma unroll
    for (int j = 0; j < NTOK / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int r = row0 + 8 * j + 2 * tig + c;
        if (r >= row_end) continue;
        const float lo = acc[0][4 * j + c] * s_lo, hi = acc[0][4 * j + 2 + c] * s_hi;
        if (!fuse_silu) {
          Y[size_t(r) * N + n_row] = __float2bfloat16_rn(lo);
          Y[size_t(r) * N + n_row + 8] = __float2bfloat16_rn(hi);
        } else {
          Y[size_t(r) * (N / 2) + (n0 + cw * 64 + 16 * warp_in_wg) / 2 + gid] = __float2bfloat16_rn(w8_silu_mul(lo, hi));
        }
      }
  }
}

}  // namespace dispatch
