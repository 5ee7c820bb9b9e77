// Epilogues of the prefill grouped GEMM (sm90_bf16_grouped_gemm_contiguous.cuh). Each consumer
// warpgroup ends a tile holding 64 rows x 256 outputs in fp32 and writes the rows of
// [row_base, row_end) as bf16; rows past row_end belong to the next expert (or to no expert) and
// are never written.
//
// Accumulator layout (m64nN): thread (warp w of the warpgroup, lane) holds for output column block j
// (8 columns): acc[4j + {0,1}] at row 16w + lane/4, columns 8j + 2(lane%4) + {0,1}; acc[4j + {2,3}]
// at the same columns 8 rows further down.
// Fused SiLU: W's rows are gate/up interleaved by 8, so column block 2i is gate and 2i+1 is up for
// the activation's column block i; Y is act [M, N/2].
//
// direct (g_contig_epilogue = 0, the old one): 4-byte bf16x2 stores straight from the registers; a
// warp's store touches 8 rows x 16 bytes, 64 store instructions per thread per tile.
// staged (g_contig_epilogue = 1): the warpgroup parks 64 rows x 64 outputs (8 KB, its own buffer
// after the TMA ring, so the producer keeps loading the next tile meanwhile) in shared memory, then
// each thread copies 16-byte pieces of whole rows out: a warp's store covers 4 full 128-byte rows,
// 4 store instructions per thread per 64 columns. Same bf16 rounding, so the same bits as direct.
// staged + TMA stores (g_contig_epilogue = 3): a chunk whose 64 rows all belong to the expert leaves shared memory
// as one TMA store (a map of Y with the 128B swizzle, 64 x 64 boxes: the buffer's layout as it is) issued by the
// warpgroup's first thread, so the warpgroup goes on without copying it out; chunks with rows of another expert (an
// expert's last tile) keep the threads' copy-out, since a box writes every row it covers.
// stmatrix (g_contig_epilogue = 3 and 4): the registers go into the staging buffer with stmatrix.m8n8.x4 (a warp's
// 16 rows x 16 columns per instruction, the accumulators' fragment layout), 4 shared stores per thread per 64-column
// chunk instead of 16 st.shared.u32; the same bytes at the same places.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>
#include "../common/bf16.cuh"
#include "../common/sm90.cuh"

namespace dispatch {

__device__ __forceinline__ float contig_silu_mul(float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; }

// r: this thread's first fragment row (global), c0: the warpgroup's first output column; width: its outputs, 256
// (acc[0..127]) or 128 (a half tile's acc[0..63], the same layout).
__device__ __forceinline__ void contig_epilogue_direct(const float (&acc)[128], __nv_bfloat16* __restrict__ Y, int r,
                                                       int n0, int row_end, int N, int width, int lane,
                                                       bool fuse_silu) {
  const int c = n0 + 2 * (lane & 3);
  if (!fuse_silu) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = c + 8 * j;
      if (8 * j < width && col < N) {
        if (r < row_end)
          *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r) * N + col) = __floats2bfloat162_rn(acc[4 * j], acc[4 * j + 1]);
        if (r + 8 < row_end)
          *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r + 8) * N + col) =
              __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int col = n0 / 2 + 8 * i + 2 * (lane & 3);
      if (16 * i < width && 2 * col < N) {
        const float* gt = acc + 8 * i;
        const float* up = acc + 8 * i + 4;
        if (r < row_end)
          *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r) * (N / 2) + col) =
              __floats2bfloat162_rn(contig_silu_mul(gt[0], up[0]), contig_silu_mul(gt[1], up[1]));
        if (r + 8 < row_end)
          *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r + 8) * (N / 2) + col) =
              __floats2bfloat162_rn(contig_silu_mul(gt[2], up[2]), contig_silu_mul(gt[3], up[3]));
      }
    }
  }
}

// Staging buffer per consumer warpgroup: 64 rows x 64 bf16 = 128-byte rows. The 16-byte piece p of
// row r sits at piece p ^ (r & 7): the fragment writes (8 rows x 4 lanes per column block) and the
// row reads (8 lanes per row) each touch all 32 banks once per 8 lanes.
constexpr int kEpiCols = 64;
constexpr int kEpiBytes = 64 * kEpiCols * 2;

__device__ __forceinline__ void epi_bar(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void epi_st32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
// Four 8 x 8 bf16 matrices: lanes 8i..8i+7 give the row addresses of matrix i, r[i] is this lane's fragment of it.
__device__ __forceinline__ void epi_stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint4 epi_ld128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr)
               : "memory");
  return v;
}

// buf: this warpgroup's kEpiBytes; bar_id: its named barrier (1 or 2; 0 is __syncthreads);
// row_base: global row of the warpgroup's first row; col0 / ld: the tile's first output column and
// the output row length (n0 and N, or n0 / 2 and N / 2 with kSilu); width: the warpgroup's outputs of the
// GEMM, 256 or 128 (a half tile, acc[0..63]); t: thread index in the warpgroup. acc: the warpgroup's m64nN
// accumulators (indexed with constants after unrolling, so they stay in registers). tm_y: Y as [rows, ld] boxes of
// 64 x 64 with the 128B swizzle for the TMA stores, or nullptr for the threads' copy-out only; with it, the
// warpgroup's thread 0 must call contig_epilogue_drain before the CTA exits. stm: stage with stmatrix.
// Every branch around a barrier depends on tile values only, the same for all 128 threads.
template <bool kSilu>
__device__ __forceinline__ void contig_epilogue_staged(const float* acc, uint8_t* buf, int bar_id,
                                                       __nv_bfloat16* __restrict__ Y, int row_base, int row_end,
                                                       int col0, int ld, int width, int t,
                                                       const CUtensorMap* tm_y = nullptr, bool stm = false) {
  constexpr int kChunks = (kSilu ? 16 : 32) / 8;  // 64-column chunks in a whole tile's output
  const int chunks = width == 256 ? kChunks : kChunks / 2;
  if (row_base >= row_end) return;  // none of this warpgroup's rows belongs to the expert
  const uint32_t base = sm90::smem_addr(buf);
  const int lane = t & 31;
  const int fr = (t >> 5) * 16 + (lane >> 2);  // fragment rows fr and fr + 8 (same r & 7)
  const int fb = (lane & 3) * 4;               // byte inside the 16-byte piece
  const int rr = t >> 3, rp = t & 7;           // copy-out: rows rr + 16p, piece rp
  // stmatrix: lane group g = lane / 8 addresses matrix g: the warp's upper 8 rows (g even) or lower 8 (g odd) of
  // column block 2i + g / 2; its row there is sr (sr & 7 == lane & 7)
  const int sg = lane >> 3, sr = (t >> 5) * 16 + ((sg & 1) << 3) + (lane & 7);
  // column block j's two fragments (rows fr and fr + 8), as bf16x2
  auto frag = [&](int j, uint32_t& lo, uint32_t& hi) {
    if constexpr (kSilu) {
      const float* g = acc + 8 * j;
      const float* u = acc + 8 * j + 4;
      lo = pack_bf16x2(contig_silu_mul(g[0], u[0]), contig_silu_mul(g[1], u[1]));
      hi = pack_bf16x2(contig_silu_mul(g[2], u[2]), contig_silu_mul(g[3], u[3]));
    } else {
      lo = pack_bf16x2(acc[4 * j], acc[4 * j + 1]);
      hi = pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  };
  const bool whole = tm_y != nullptr && row_base + 64 <= row_end;  // every row of the chunks is the expert's
#pragma unroll
  for (int ch = 0; ch < kChunks; ++ch) {
    if (ch < chunks && col0 + ch * kEpiCols < ld) {
      if (tm_y != nullptr && t == 0) sm90::bulk_wait_read<0>();  // the last TMA store has read the buffer
      epi_bar(bar_id);  // the previous chunk's (or tile's) copy-out has read the buffer
      if (stm) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // column blocks 2i and 2i + 1 of the chunk
          uint32_t lo0, hi0, lo1, hi1;
          frag(ch * 8 + 2 * i, lo0, hi0);
          frag(ch * 8 + 2 * i + 1, lo1, hi1);
          const int jj = 2 * i + (sg >> 1);
          epi_stmatrix_x4(base + sr * 128 + ((jj ^ (sr & 7)) << 4), lo0, hi0, lo1, hi1);
        }
      } else {
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          uint32_t lo, hi;
          frag(ch * 8 + jj, lo, hi);
          const uint32_t off = uint32_t(((jj ^ (fr & 7)) << 4) + fb);
          epi_st32(base + fr * 128 + off, lo);
          epi_st32(base + (fr + 8) * 128 + off, hi);
        }
      }
      if (whole) sm90::fence_proxy_async_shared();  // this thread's writes, before the TMA store reads them
      epi_bar(bar_id);  // the chunk is in shared memory
      if (whole) {
        if (t == 0) {
          sm90::tma_store_2d(tm_y, buf, col0 + ch * kEpiCols, row_base);  // columns past ld are clipped
          sm90::bulk_commit();
        }
        continue;
      }
      const int col = col0 + ch * kEpiCols + rp * 8;
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int row = rr + 16 * p;
        const uint4 v = epi_ld128(base + row * 128 + ((rp ^ (row & 7)) << 4));
        if (row_base + row < row_end && col < ld)
          *reinterpret_cast<uint4*>(Y + size_t(row_base + row) * ld + col) = v;
      }
    }
  }
}

// The warpgroup's last TMA store has read its staging buffer (thread 0, which issued them, before the CTA exits and
// its shared memory goes; the stores' writes to Y are complete when the kernel is).
__device__ __forceinline__ void contig_epilogue_drain(const CUtensorMap* tm_y, int t) {
  if (tm_y != nullptr && t == 0) sm90::bulk_wait_read<0>();
}

}  // namespace dispatch
