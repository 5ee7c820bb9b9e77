// sm90_bf16_gemm_wgmma (GemmPath::Wgmma; gemm() takes it for T > 64 only under
// DISPATCH_CUDA_GEMM_WGMMA=1, read once): Y[T, N] (+)= X[T, K] . W[N, K]^T (+ bias[N]), bf16 in,
// fp32 out, for prefill (T > 64; any T > 0 works). K % 8 == 0 and X, W 16-byte aligned (the caller
// checks; TMA needs both). Not yet measured on a GPU (compiled for sm_90a only).
//
// The layout of kernels/src's grouped GEMM (sm90_bf16_grouped_gemm_contiguous.cuh), which runs at
// ~torch._grouped_mm speed on the H200, for a dense Y with an fp32 epilogue:
// - CTA tile 128 tokens x BN outputs (BN 256, or 128 where the 256-wide tiles would leave a wave
//   mostly idle; wgmma_pick_bn) x 64 k. A ring of ST stages (4 at BN 256, 6 at BN 128: 192 KB)
//   in 128B-swizzled shared memory, each stage one TMA box of X (128 rows x 64 k, 16 KB) and one
//   of W (BN rows x 64 k); rows past T or N and k past K arrive as zeros, so ragged shapes need no
//   masking in the main loop.
// - 384 threads, warp-specialized: warpgroup 0 is the producer (one thread issues every TMA load;
//   setmaxnreg shrinks the group to 40 registers), warpgroups 1 and 2 are consumers (232
//   registers): consumer c runs wgmma.mma_async m64nBNk16 on tokens 64c..64c+63 of the tile with
//   X as A and W as B, both straight from shared memory (4 k16 steps per stage), BN / 2 fp32
//   accumulators per thread. A stage is released (its empty barrier, one arrival per consumer
//   warp) once wgmma.wait_group 1 says the next stage's MMAs are the only ones in flight.
// - Persistent: grid = min(tiles, SMs), CTA b walks tiles b, b + grid, ...; the producer runs ahead
//   across tile boundaries, so the next tile's loads overlap this tile's epilogue. Tiles are
//   ordered in groups of gn W tiles (all of them when W fits ~24 MB, the projections; 8 MB worth
//   otherwise, the LM head), tokens slowest within a group: the CTAs running together share W
//   tiles and X rows through the L2.
// - Epilogue from the registers: each thread owns 2 adjacent outputs per (row, n8 block), written
//   as float2 (+ bias, + the old Y when accumulating) where N is even and Y, bias 8-byte aligned,
//   else one by one. No split K: each output is one CTA's fixed-order sum (the same bits run to
//   run), no atomics, no workspace; the host allocates nothing (tensor maps are host structs, the
//   opt-in and SM count are host queries), so a graph capture may hold the first launch.
// - PDL: the producer issues the first ring of W loads before griddepcontrol.wait (weights are
//   never written) and X's after it; the consumers wait before they touch Y.
// Legend: T tokens, N output features (W rows), K input features, BN W rows per tile, ST stages,
// kb 64-wide k blocks; gid = lane / 4, tig = lane % 4.
#pragma once
#include <cuda.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include "common/sm90.cuh"
#include "gemm/wgmma_m64n256k16.cuh"  // kernels/src's generated m64n256k16 wrapper
#include "gemm_mma.cuh"
#include "gemm_wgmma_qkv.cuh"
#include "gemm_skinny2.cuh"  // skinny2_map(): the 128B-swizzled TMA tensor maps

namespace dcuda {
namespace mma {

namespace sm90 = ::dispatch::sm90;

// d (+)= A(64 x 16) . B(128 x 16)^T, both K-major 128B-swizzled in shared memory; accumulate 0
// ignores d's old value. Same operand order and layout as kernels/src's m64n256k16 wrapper.
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                      int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

constexpr int kWgBM = 128;       // tokens per tile (two consumer warpgroups of 64)
constexpr int kWgBK = 64;        // k per stage: one 128-byte swizzled row per token / W row
constexpr int kWgThreads = 384;  // warpgroup 0: producer; 1, 2: consumers
static_assert(kWgBK == kS2BK, "skinny2_map's boxes are 64 k wide");

template <int BN>
struct WgmmaCfg {
  static_assert(BN == 128 || BN == 256, "tile width 128 or 256");
  static constexpr int kStages = BN == 256 ? 4 : 6;
  static constexpr int kXBytes = kWgBM * kWgBK * 2;  // 16 KB
  static constexpr int kWBytes = BN * kWgBK * 2;     // 16 or 32 KB: stages stay 1024-aligned
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kSmem = kStages * kStageBytes + 1024;  // + slack to align the ring to 1024
  static_assert(kSmem + 2 * kStages * 8 <= 232448, "the ring must fit the 227 KB a CTA may opt into");
};

template <int BN>
__device__ __forceinline__ void wgmma_tile_k16(float (&d)[BN / 2], uint64_t da, uint64_t db, int accumulate) {
  if constexpr (BN == 256) sm90::wgmma_m64n256k16_bf16(d, da, db, accumulate);
  else wgmma_m64n128k16_bf16(d, da, db, accumulate);
}

// Tile w of the walk -> (token tile m, W tile n): groups of gn W tiles, tokens slowest in a group.
__device__ __forceinline__ void wgmma_tile_of(int w, int m_tiles, int n_tiles, int gn, int& m, int& n) {
  const int per_group = gn * m_tiles;
  const int g = w / per_group, local = w - g * per_group;
  const int width = min(gn, n_tiles - g * gn);
  m = local / width;
  n = g * gn + (local - m * width);
}

// kQkv: the q|k|v projection with qkv_post's work in the epilogue (gemm_wgmma_qkv.cuh; post describes it).
template <int BN, bool kQkv = false>
__global__ void __launch_bounds__(kWgThreads, 1)
    sm90_bf16_gemm_wgmma(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_w, int T,
                         int N, int k_blocks, int m_tiles, int n_tiles, int gn, const float* __restrict__ bias,
                         float* __restrict__ Y, bool accumulate, const __grid_constant__ QkvPostArgs post) {
  using C = WgmmaCfg<BN>;
  constexpr int ST = C::kStages;
  extern __shared__ uint8_t wg_raw[];
  __shared__ __align__(8) uint64_t full[ST], empty[ST];
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(wg_raw) + 1023) & ~uintptr_t(1023));
  pdl_trigger();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = tid >> 7;
  const int total = m_tiles * n_tiles;
  const int my_tiles = int(blockIdx.x) < total ? (total - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  const int items = my_tiles * k_blocks;  // item i: tile blockIdx.x + (i / k_blocks) gridDim.x, k block i % k_blocks
  if (tid == 0) {
    for (int s = 0; s < ST; ++s) {
      sm90::mbar_init(&full[s], 1);   // the producer's arrive.expect_tx; the bytes complete it
      sm90::mbar_init(&empty[s], 8);  // lane 0 of each consumer warp, after its wgmmas read the stage
    }
    sm90::mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    if (tid == 0 && items > 0) {
      sm90::tma_prefetch_desc(&tm_x);
      sm90::tma_prefetch_desc(&tm_w);
      auto coords = [&](int i, int& m, int& n, int& kb) {
        const int t = i / k_blocks;
        kb = i - t * k_blocks;
        wgmma_tile_of(int(blockIdx.x) + t * int(gridDim.x), m_tiles, n_tiles, gn, m, n);
      };
      auto load_w = [&](int i) {
        int m, n, kb;
        coords(i, m, n, kb);
        const int stage = i % ST;
        sm90::mbar_expect_tx(&full[stage], C::kStageBytes);  // X and W bytes: X may follow later
        sm90::tma_load_2d(ring + stage * C::kStageBytes + C::kXBytes, &tm_w, &full[stage], kb * kWgBK, n * BN);
      };
      auto load_x = [&](int i) {
        int m, n, kb;
        coords(i, m, n, kb);
        const int stage = i % ST;
        sm90::tma_load_2d(ring + stage * C::kStageBytes, &tm_x, &full[stage], kb * kWgBK, m * kWgBM);
      };
      const int pre = min(ST, items);
      for (int i = 0; i < pre; ++i) load_w(i);
      pdl_wait();  // X is the previous kernel's output
      for (int i = 0; i < pre; ++i) load_x(i);
      for (int i = pre; i < items; ++i) {
        sm90::mbar_wait(&empty[i % ST], ((i / ST) & 1) ^ 1);  // round i / ST - 1 of the stage released
        load_w(i);
        load_x(i);
      }
    } else {
      pdl_wait();
    }
    return;
  }

  sm90::setmaxnreg_inc<232>();
  pdl_wait();  // Y (read when accumulating, written) belongs to the previous kernel until then
  const int cw = wg - 1;  // this warpgroup's 64 tokens of the tile
  const int gid = lane >> 2, tig = lane & 3;
  const bool vec2 = N % 2 == 0 && (reinterpret_cast<uintptr_t>(Y) | reinterpret_cast<uintptr_t>(bias)) % 8 == 0;
  float acc[BN / 2];
  int i = 0;
  for (int tt = 0; tt < my_tiles; ++tt) {
    int m, n;
    wgmma_tile_of(int(blockIdx.x) + tt * int(gridDim.x), m_tiles, n_tiles, gn, m, n);
    int prev = -1;  // the stage whose release waits for wgmma_wait<1>
    for (int kb = 0; kb < k_blocks; ++kb, ++i) {
      const int stage = i % ST;
      sm90::mbar_wait(&full[stage], (i / ST) & 1);
      const uint8_t* sx = ring + stage * C::kStageBytes + cw * (64 * kWgBK * 2);
      const uint8_t* sw = ring + stage * C::kStageBytes + C::kXBytes;
      sm90::wgmma_fence();
#pragma unroll
      for (int k = 0; k < kWgBK / 16; ++k)  // k16 steps: 32 bytes along the swizzled rows
        wgmma_tile_k16<BN>(acc, sm90::desc_k_major_sw128(sx + 32 * k), sm90::desc_k_major_sw128(sw + 32 * k),
                           (kb | k) != 0);
      sm90::wgmma_commit();
      sm90::wgmma_wait<1>();  // the previous k block's wgmmas are done: release its stage
      if (prev >= 0 && lane == 0) sm90::mbar_arrive(&empty[prev]);
      prev = stage;
    }
    sm90::wgmma_wait<0>();
    if (prev >= 0 && lane == 0) sm90::mbar_arrive(&empty[prev]);

    // accumulator d[4j + c]: token 16 (warp % 4) + gid + 8 (c >> 1), output 8j + 2 tig + (c & 1)
    const int row = m * kWgBM + cw * 64 + (warp & 3) * 16 + gid;
    if constexpr (kQkv) {
      wgmma_qkv_post_epilogue<BN>(acc, post, bias, row, n, lane, T, N, Y);
      continue;
    }
    const int col0 = n * BN + 2 * tig;
    // Accumulating (the o projection and the dense MLP's down add into the fp32 residual stream), Y's old values
    // for kEpiJ column groups are loaded before any of them is added and stored: one load after another, each
    // store waiting on its own load, left the epilogue a chain of round trips (H200, session 23: the o projection
    // of an 8,192-token prefill chunk took 296 us against the q|k|v projection's 284 for 1.26x its FLOPs).
    constexpr int kEpiJ = 8;
#pragma unroll
    for (int j0 = 0; j0 < BN / 8; j0 += kEpiJ) {
      float2 old[kEpiJ][2];
#pragma unroll
      for (int jj = 0; jj < kEpiJ; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int col = col0 + 8 * (j0 + jj), t = row + 8 * h;
          old[jj][h] = accumulate && vec2 && col < N && t < T
                           ? *reinterpret_cast<const float2*>(Y + size_t(t) * N + col)
                           : make_float2(0.f, 0.f);
        }
#pragma unroll
      for (int jj = 0; jj < kEpiJ; ++jj) {
        const int j = j0 + jj, col = col0 + 8 * j;
        if (col < N) {
          float2 b = make_float2(0.f, 0.f);
          if (bias != nullptr) {
            if (vec2) b = __ldg(reinterpret_cast<const float2*>(bias + col));
            else b = make_float2(__ldg(bias + col), col + 1 < N ? __ldg(bias + col + 1) : 0.f);
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int t = row + 8 * h;
            if (t < T) {
              float v0 = acc[4 * j + 2 * h] + b.x, v1 = acc[4 * j + 2 * h + 1] + b.y;
              float* y = Y + size_t(t) * N + col;
              if (vec2) {  // N even, col even: both in range
                if (accumulate) v0 += old[jj][h].x, v1 += old[jj][h].y;
                *reinterpret_cast<float2*>(y) = make_float2(v0, v1);
              } else {
                y[0] = accumulate ? y[0] + v0 : v0;
                if (col + 1 < N) y[1] = accumulate ? y[1] + v1 : v1;
              }
            }
          }
        }
      }
    }
  }
}

// ---- host -------------------------------------------------------------------------------------

// The dynamic shared-memory opt-in, once per device (expert parallelism drives several GPUs).
template <int BN, bool kQkv = false>
void wgmma_opt_in() {
  static std::atomic<uint64_t> opted{0};
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (opted.load() & bit)) return;
  DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_wgmma<BN, kQkv>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               WgmmaCfg<BN>::kSmem));
  opted.fetch_or(bit);
}

// Tile width: the one whose persistent walk ends first, counting a 256-wide tile as 1.8 128-wide
// ones (its wgmma reads less shared memory per flop) and the walk as ceil(tiles / SMs) tiles per
// CTA. q|k|v (N 5120) at 132 SMs: 256 at T = 512 and 8192, 128 at 2048; o (N 2048): 128 at 512,
// 256 at 2048 and 8192. An estimate, not a measurement.
inline int wgmma_pick_bn(int T, int N, int sms) {
  const long m_tiles = (T + kWgBM - 1) / kWgBM;
  const long t256 = m_tiles * ((N + 255) / 256), t128 = m_tiles * ((N + 127) / 128);
  const long c256 = 18 * ((t256 + sms - 1) / sms), c128 = 10 * ((t128 + sms - 1) / sms);
  return c256 <= c128 ? 256 : 128;
}

struct WgmmaPlan {
  int bn, m_tiles, n_tiles, gn, ctas, stages, smem;
};

// bn: 0 picks (wgmma_pick_bn); 128 or 256 forces the tile width.
inline WgmmaPlan wgmma_plan(int T, int K, int N, int bn) {
  static const int sms = sm_count();
  WgmmaPlan p{};
  p.bn = bn == 128 || bn == 256 ? bn : wgmma_pick_bn(T, N, sms);
  p.m_tiles = (T + kWgBM - 1) / kWgBM;
  p.n_tiles = (N + p.bn - 1) / p.bn;
  DC_CHECK(int64_t(p.m_tiles) * p.n_tiles < (int64_t(1) << 31), "gemm wgmma: too many tiles");
  // W tiles per group: all of W when it fits ~24 MB of the L2, else ~8 MB of W rows
  const int64_t tile_bytes = int64_t(p.bn) * K * 2;
  p.gn = int64_t(p.n_tiles) * tile_bytes <= (int64_t(24) << 20)
             ? p.n_tiles
             : int(std::max<int64_t>(1, std::min<int64_t>(p.n_tiles, (int64_t(8) << 20) / tile_bytes)));
  p.ctas = int(std::min<int64_t>(int64_t(p.m_tiles) * p.n_tiles, sms));
  p.stages = p.bn == 256 ? WgmmaCfg<256>::kStages : WgmmaCfg<128>::kStages;
  p.smem = p.bn == 256 ? WgmmaCfg<256>::kSmem : WgmmaCfg<128>::kSmem;
  return p;
}

template <int BN, bool kQkv = false>
void launch_wgmma_bn(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                     bool accumulate, const WgmmaPlan& p, cudaStream_t s, const QkvPostArgs& post = QkvPostArgs{}) {
  wgmma_opt_in<BN, kQkv>();
  const CUtensorMap tm_x = skinny2_map(X, T, K, kWgBM);
  const CUtensorMap tm_w = skinny2_map(W, N, K, BN);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(p.ctas);
  cfg.blockDim = dim3(kWgThreads);
  cfg.dynamicSmemBytes = WgmmaCfg<BN>::kSmem;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  if (pdl_enabled() && s != nullptr) {  // as launch_k: the step's own stream only
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  DC_CUDA(cudaLaunchKernelEx(&cfg, sm90_bf16_gemm_wgmma<BN, kQkv>, tm_x, tm_w, T, N, (K + kWgBK - 1) / kWgBK,
                             p.m_tiles, p.n_tiles, p.gn, bias, Y, accumulate, post));
}

// bn: 0 picks the tile width; 128 or 256 forces it (the harness's A/B).
inline void launch_wgmma(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                         bool accumulate, int bn, cudaStream_t s) {
  DC_CHECK(T > 0 && K > 0 && N > 0, "gemm wgmma: T, K and N must be > 0");
  const WgmmaPlan p = wgmma_plan(T, K, N, bn);
  if (p.bn == 256) launch_wgmma_bn<256>(X, T, K, W, N, bias, Y, accumulate, p, s);
  else launch_wgmma_bn<128>(X, T, K, W, N, bias, Y, accumulate, p, s);
}

// The q|k|v projection with qkv_post in the epilogue (gemm_wgmma_qkv.cuh): post.D == kQkvHeadDim, qk_norm 0 or 1,
// N == (Hq + 2 Hkv) D, Y == post.qkv (the caller checks); the tile width as launch_wgmma picks it.
inline void launch_wgmma_qkv(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                             const QkvPostArgs& post, int bn, cudaStream_t s) {
  DC_CHECK(T > 0 && K > 0 && N > 0, "gemm wgmma: T, K and N must be > 0");
  const WgmmaPlan p = wgmma_plan(T, K, N, bn);
  if (p.bn == 256) launch_wgmma_bn<256, true>(X, T, K, W, N, bias, Y, false, p, s, post);
  else launch_wgmma_bn<128, true>(X, T, K, W, N, bias, Y, false, p, s, post);
}

}  // namespace mma
}  // namespace dcuda
