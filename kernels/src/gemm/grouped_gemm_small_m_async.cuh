// The "async" schedule of the small-M grouped GEMM (g_small_m_impl = 4, dk.set_small_m_impl("async")).
// Written 2026-11-29 19:50 UTC for the T = 1 fixed cost and int8's per-byte cost; not yet run on a GPU.
//
// Same grid, routing scan, MMA layout ("swap AB", see grouped_gemm_small_m.cuh) and split-K reduction
// as the legacy kernel; what differs:
// - weights go global -> shared memory with cp.async (16 bytes per lane, no registers held), into a
//   ring of kStages items per warp; kStages - 1 items (7 at the default 8: 448 bytes per lane, 14 KB
//   per warp) are in flight from the first instruction after the scan. The legacy kernel holds its
//   loads in registers, which capped it at 2 items (depth 4 lost on registers). Each lane reads back
//   only what it copied itself, so no barrier is needed: cp.async.wait_group is enough;
// - the first pass's weight copies are issued as soon as the expert is known, before the row count is
//   read and before the CTA barrier;
// - the warps take the CTA's (row block, k-chunk) items round-robin over the flat list, so K / chunk
//   not a multiple of 4 no longer idles warps (int8 Qwen3 down: 6 chunks = 2/2/1/1 per row block in the
//   legacy kernel); every warp parks a partial (zeros if it had no item) for every row block;
// - int8 -> bf16 in 4 instructions per 2 weights (byte permute, two logic ops, one bf16x2 subtract)
//   instead of 11 per 4; the scale is applied per output row in the reduction, as before.
#pragma once
#include "grouped_gemm_small_m.cuh"

namespace dispatch {

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sm90::smem_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Two int8 of q (bytes picked by sel: 0x4140 -> bytes 0, 1; 0x4342 -> bytes 2, 3) -> bf16x2, low half
// first. x = 00 b1 00 b0; bf16 0x4300 | (b & 0x7f) = 128 + low 7 bits, 0x4300 | (b & 0x80) = 128 or
// 256 for the sign bit; the difference is the two's-complement value, exact in bf16 (|v| <= 128).
__device__ __forceinline__ uint32_t int8x2_to_bf16x2(uint32_t q, uint32_t sel) {
  const uint32_t x = __byte_perm(q, 0u, sel);
  const uint32_t mant = (x & 0x007F007Fu) | 0x43004300u, sign = (x & 0x00800080u) | 0x43004300u;
  uint32_t d;
  asm("sub.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(mant), "r"(sign));
  return d;
}

// One chunk of MMAs from the 4 weight vectors c (as SmallMChunk::a), all n-tiles that hold tokens.
template <bool kInt8, int NT>
__device__ __forceinline__ void small_m_async_compute(const uint4 (&c)[2][2], float (&acc)[NT][4],
                                                      const __nv_bfloat16* x_rows, int K, int kbase, int t, int g,
                                                      int m_left) {
  constexpr int kK = SmallMChunk<kInt8>::kK;
  constexpr int kWords = kInt8 ? 8 : 4;  // bf16x2 words per row per half
  uint32_t a[2][2][kWords];              // [row g / g+8][half]
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t* q = reinterpret_cast<const uint32_t*>(&c[r][h]);
      if constexpr (kInt8) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          a[r][h][2 * i] = int8x2_to_bf16x2(q[i], 0x4140u);
          a[r][h][2 * i + 1] = int8x2_to_bf16x2(q[i], 0x4342u);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[r][h][i] = q[i];
      }
    }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (nt * 8 >= m_left) break;  // warp-uniform
    const int row = min(nt * 8 + g, m_left - 1);
    const __nv_bfloat16* xp = x_rows + size_t(row) * K + kbase + t * (kInt8 ? 16 : 8);
    uint32_t b[2][kWords];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4* p = reinterpret_cast<const uint4*>(xp + h * kK / 2);
#pragma unroll
      for (int v = 0; v < kWords / 4; ++v) {
        const uint4 u = __ldg(p + v);
        b[h][4 * v] = u.x, b[h][4 * v + 1] = u.y, b[h][4 * v + 2] = u.z, b[h][4 * v + 3] = u.w;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int s = 0; s < kWords / 2; ++s)
        mma_bf16_16816(acc[nt], a[0][h][2 * s], a[1][h][2 * s], a[0][h][2 * s + 1], a[1][h][2 * s + 1],
                       b[h][2 * s], b[h][2 * s + 1]);
  }
}

// Dynamic shared memory of the ring: [warp][stage][4 vectors][32 lanes] x 16 bytes.
template <int kStages>
constexpr int small_m_async_ring_bytes() { return kSmallWarps * kStages * 4 * 32 * 16; }

template <bool kInt8, int NT, int kStages>
__global__ void __launch_bounds__(kSmallWarps * 32, 1)
    grouped_gemm_small_m_async_kernel(const __nv_bfloat16* __restrict__ X, const uint8_t* __restrict__ W,
                                      const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                      ExpertRows rows, int E, int N, int K, int fuse_silu, int rb_per_cta) {
  static_assert(kStages >= 2, "one stage is consumed while the others fill");
  constexpr int kK = SmallMChunk<kInt8>::kK;
  constexpr int kChunkBytes = 128;  // bytes of one weight row in one chunk (64 bf16 or 128 int8)
  constexpr int kTok = NT * 8;
  constexpr int kSlots = small_m_slots<NT>();
  __shared__ float s_red[kSlots][kSmallWarps][kTok][kSmallRows + 1];
  __shared__ int s_done[kSlots];
  extern __shared__ uint4 s_ring[];

  const int e = find_active_expert(rows, E, blockIdx.y);
  if (e < 0) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int rb0 = blockIdx.x * rb_per_cta;
  const int n_rb = min(rb_per_cta, N / kSmallRows - rb0);
  const size_t row_bytes = size_t(K) * (kInt8 ? 1 : 2);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
  const int e_w = (e + 1) % E;
#else
  const int e_w = e;
#endif
  const uint8_t* w_base = W + (size_t(e_w) * N + size_t(rb0) * kSmallRows + g) * row_bytes + t * 16;
  const int chunks = K / kK;
  const int mine = (n_rb * chunks - warp + kSmallWarps - 1) / kSmallWarps;  // flat items warp, warp + 4, ...
  uint4* ring = s_ring + warp * (kStages * 4 * 32) + lane;

  // Load cursor (row block, chunk) of the next item to copy; items are copied and computed in order.
  int ld_rb = 0, ld_c = warp, ld_n = 0;
  auto ld_reset = [&] {
    ld_rb = 0, ld_c = warp, ld_n = 0;
    while (ld_c >= chunks) ld_c -= chunks, ++ld_rb;
  };
  auto issue = [&] {  // copy the next item (if any) into its ring slot; always one commit group
    if (ld_n < mine) {
      const uint8_t* p = w_base + size_t(ld_rb) * kSmallRows * row_bytes + size_t(ld_c) * kChunkBytes;
      uint4* s = ring + (ld_n % kStages) * (4 * 32);
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) cp_async_16(s + (2 * r + h) * 32, p + r * 8 * row_bytes + h * (kChunkBytes / 2));
      ++ld_n;
      ld_c += kSmallWarps;
      while (ld_c >= chunks) ld_c -= chunks, ++ld_rb;
    }
    cp_async_commit();
  };
  auto prologue = [&] {
    ld_reset();
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue();
  };
  prologue();  // the first pass's copies start before the counts are read and before the barrier

  if (tid < kSlots) s_done[tid] = 0;
  __syncthreads();
  const int m = rows.count(e), r0 = rows.begin(e);

  for (int pass = 0; pass < m; pass += kTok) {
    if (pass > 0) prologue();
    const int m_left = m - pass;
    const __nv_bfloat16* x_rows = X + size_t(r0 + pass) * K;
    float acc[NT][4];
#pragma unroll
    for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;

    // This warp's K slice of row block rb is done: park the partial sums (zeros when the warp had no
    // chunk of it); the last of the 4 warps to park adds the slices in warp order and writes the outputs.
    auto park = [&](int rb) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        s_red[rb][warp][nt * 8 + 2 * t][g] = acc[nt][0];
        s_red[rb][warp][nt * 8 + 2 * t + 1][g] = acc[nt][1];
        s_red[rb][warp][nt * 8 + 2 * t][g + 8] = acc[nt][2];
        s_red[rb][warp][nt * 8 + 2 * t + 1][g + 8] = acc[nt][3];
        acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
      }
      __threadfence_block();
      __syncwarp();
      int prev = 0;
      if (lane == 0) prev = atomicAdd(&s_done[rb], 1);
      prev = __shfl_sync(0xffffffffu, prev, 0);
      if (prev != kSmallWarps - 1) return;
      __threadfence_block();
      const int n0 = (rb0 + rb) * kSmallRows;
      auto sum = [&](int tok, int r) {
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < kSmallWarps; ++w) v += s_red[rb][w][tok][r];
        if constexpr (kInt8) v *= __ldg(scales + size_t(e_w) * N + n0 + r);
        return v;
      };
      const int n_tok = min(m_left, kTok);  // only the tile's real tokens (a 64-token tile may hold 16)
      if (!fuse_silu) {
        for (int j = lane; j < n_tok * kSmallRows; j += 32) {
          const int tok = j / kSmallRows, r = j % kSmallRows;
          Y[size_t(r0 + pass + tok) * N + n0 + r] = __float2bfloat16_rn(sum(tok, r));
        }
      } else {  // gate/up interleaved by 8 rows: rows r (gate) and r + 8 (up) -> act column n0/2 + r
        for (int j = lane; j < n_tok * 8; j += 32) {
          const int tok = j / 8, r = j % 8;
          const float gate = sum(tok, r), up = sum(tok, r + 8);
          Y[size_t(r0 + pass + tok) * (N / 2) + n0 / 2 + r] =
              __float2bfloat16_rn(__fdividef(gate, 1.f + __expf(-gate)) * up);
        }
      }
      __syncwarp();
      if (lane == 0) s_done[rb] = 0;  // ready for the next pass
    };

    int c_rb = 0, c_c = warp, parked = 0;  // compute cursor; row blocks [0, parked) are parked
    while (c_c >= chunks) c_c -= chunks, ++c_rb;
    for (int i = 0; i < mine; ++i) {
      cp_async_wait<kStages - 2>();  // item i landed (groups committed: items 0 .. i + kStages - 2)
      issue();  // item i + kStages - 1 into the slot item i - 1 used (its MMAs already consumed it)
      while (parked < c_rb) park(parked++);
      uint4 c[2][2];
      const uint4* s = ring + (i % kStages) * (4 * 32);
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) c[r][h] = s[(2 * r + h) * 32];
      small_m_async_compute<kInt8, NT>(c, acc, x_rows, K, c_c * kK, t, g, m_left);
      c_c += kSmallWarps;
      while (c_c >= chunks) c_c -= chunks, ++c_rb;
    }
    while (parked < n_rb) park(parked++);
    cp_async_wait<0>();  // nothing left in flight (only empty groups remain) before the ring is reused
    __syncthreads();     // the next pass reuses the slots
  }
}

}  // namespace dispatch
