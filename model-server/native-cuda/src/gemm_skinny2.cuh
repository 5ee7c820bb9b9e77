// sm90_bf16_gemm_skinny2 (GemmPath::Skinny2; gemm() takes it for every T <= 64 under
// DISPATCH_CUDA_GEMM_SKINNY2=1): Y[T, N] (+)= X[T, K] . W[N, K]^T (+ bias[N]), bf16 in, fp32 out,
// for decode batches (T <= 64). K % 8 == 0 and X, W 16-byte aligned (the caller checks; TMA
// needs both).
//
// Every byte of W is read once, so this is a streaming problem, and the design follows from it:
// - TMA (cp.async.bulk.tensor.2d) moves a tile of 128 W rows x 64 k (16 KB) plus the matching X
//   tile (8 NT tokens x 64 k; rows past T, W rows past N and k past K arrive as zeros) per stage
//   into an 8-stage ring of 128B-swizzled shared memory: 128 KB of W in flight per SM, issued by
//   one producer thread, independent of registers. The ring's size (137-193 KB) makes it one CTA
//   per SM: 5 warps, a consumer warpgroup (warps 0-3) and the producer (warp 4).
// - wgmma.mma_async m64nNk16 (N = 8 NT: T rounded up to 8, 16, 32 or 64) with W as the A operand
//   (the tile's two 64-row halves) and X as B, both read by the tensor cores from shared memory:
//   no ldmatrix, no register staging; the tensor work runs asynchronously beside the loads.
//   (The stream GEMM's mma.sync loop, every warp ldmatrix-ing the X tile, ran at ~7 SM clocks per
//   m16n8k16 in the session-3 timings: its bound at T = 64; docs/cuda-backend.md.)
// - When the 128-row tiles alone leave SMs idle (q|k|v: 40 tiles, o: 16), K is split over a
//   thread-block cluster of S CTAs (grid.x = S <= 8; split r takes the k blocks
//   [kb r / S, kb (r + 1) / S)): the host takes the largest S for which tiles x S CTAs fit the SMs
//   and `tiles` clusters of S are resident at once (cudaOccupancyMaxActiveClusters), so the
//   launch is a single wave (at 132 SMs q|k|v: S = 3, 120 CTAs; o: S = 8, 128, or 7 where 16
//   clusters of 8 do not fit). With S > 1 the grid is (S, tiles): one tile per CTA (the consumer
//   leaves its tile loop after the first tile; launch_skinny2_nt keeps this). Each CTA parks its fp32
//   partial tile in its drained ring; after a cluster barrier CTA r adds slice r of the tile over
//   the ranks 0..S-1 in that order (distributed shared memory, float4) and writes Y once. No
//   atomics and no workspace: nothing to allocate (graph capture needs no warm-up) and the same
//   bits run to run.
// - When the tiles cover the SMs (LM head; S = 1) the grid is persistent: min(tiles, SMs) CTAs
//   walk the tiles blockIdx.y, + gridDim.y, ...; the producer runs ahead across tile boundaries
//   and each tile's epilogue writes Y straight from the accumulators.
// - PDL: the producer issues the first ring of W loads before griddepcontrol.wait (weights are
//   never written) and X's after it; every other thread waits before it touches Y.
// The ring, descriptors and barrier protocol are those of kernels/src's TMA + wgmma grouped GEMM
// (common/sm90.cuh), which runs on the H200.
// Legend: T tokens, N output features (W rows), K input features, NT n8 token tiles, S K splits
// (cluster size), kb 64-wide k blocks, ST ring stages; gid = lane / 4, tig = lane % 4.
#pragma once
#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include "common/sm90.cuh"
#include "gemm_mma.cuh"

namespace dcuda {
namespace mma {

namespace sm90 = ::dispatch::sm90;  // kernels/src's mbarrier, TMA and wgmma wrappers

constexpr int kS2BM = 128;            // W rows per tile (two wgmma m64 halves)
constexpr int kS2BK = 64;             // k per stage: one 128-byte swizzled row per W row / token
constexpr int kS2Threads = 160;       // warps 0-3: the consumer warpgroup; warp 4: the producer
constexpr int kS2Stages = 8;          // ring stages (128 KB of W)
constexpr int kS2MaxSplits = 8;       // portable cluster size
constexpr int kS2RedLd = kS2BM + 4;   // partial tile row stride in floats (16-byte rows, no bank conflicts)

template <int NT>
struct Skinny2Cfg {
  static constexpr int kTok = 8 * NT;
  static constexpr int kWBytes = kS2BM * kS2BK * 2;
  static constexpr int kXBytes = kTok * kS2BK * 2;  // a multiple of 1024: stages stay 1024-aligned
  static constexpr int kStageBytes = kWBytes + kXBytes;
  static constexpr int kSmem = kS2Stages * kStageBytes + 1024;  // + slack to align the ring to 1024
  static_assert(kSmem + 2 * kS2Stages * 8 <= 232448, "the ring must fit the 227 KB a CTA may opt into");
  static_assert(kTok * kS2RedLd * 4 <= kS2Stages * kStageBytes, "the partial tile must fit in the ring");
};

// d (+)= A(64 x 16, K-major, shared memory) . B(N x 16, K-major, shared memory)^T; scale_d 0
// ignores d's old value. Accumulator layout (m64nN): thread (warp w, lane) holds d[4j + c] at row
// 16w + gid + 8 (c >> 1), column 8j + 2 tig + (c & 1).
template <int N>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);

template <>
__device__ __forceinline__ void wgmma_m64k16<8>(float (&d)[4], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma_m64k16<16>(float (&d)[8], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma_m64k16<32>(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma_m64k16<64>(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}


__device__ __forceinline__ void consumer_barrier() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }

template <int NT>
__global__ void __launch_bounds__(kS2Threads, 1)
    sm90_bf16_gemm_skinny2(const __grid_constant__ CUtensorMap tm_w, const __grid_constant__ CUtensorMap tm_x, int T,
                           int N, int k_blocks, const float* __restrict__ bias, float* __restrict__ Y,
                           bool accumulate) {
  using C = Skinny2Cfg<NT>;
  constexpr int ST = kS2Stages;
  extern __shared__ uint8_t s2_raw[];
  __shared__ __align__(8) uint64_t full[ST], empty[ST];
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(s2_raw) + 1023) & ~uintptr_t(1023));
  pdl_trigger();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int S = gridDim.x, split = blockIdx.x;
  const int kb0 = int(int64_t(k_blocks) * split / S);
  const int nkb = int(int64_t(k_blocks) * (split + 1) / S) - kb0;  // >= 1: the host keeps S <= kb
  const int tiles = (N + kS2BM - 1) / kS2BM;
  const int worker = blockIdx.y, workers = gridDim.y;
  const int my_tiles = worker < tiles ? (tiles - 1 - worker) / workers + 1 : 0;
  const int items = my_tiles * nkb;  // item i: tile worker + (i / nkb) workers, k block kb0 + i % nkb
  if (tid == 0) {
    for (int s = 0; s < ST; ++s) {
      sm90::mbar_init(&full[s], 1);   // the producer's arrive.expect_tx; the bytes complete it
      sm90::mbar_init(&empty[s], 4);  // lane 0 of each consumer warp, after its wgmmas read the stage
    }
    sm90::mbar_fence_init();
  }
  __syncthreads();

  if (warp == 4) {
    if (lane == 0 && items > 0) {
      sm90::tma_prefetch_desc(&tm_w);
      sm90::tma_prefetch_desc(&tm_x);
      auto load_w = [&](int i) {
        const int stage = i % ST, tile = worker + (i / nkb) * workers, kb = kb0 + i % nkb;
        sm90::mbar_expect_tx(&full[stage], C::kStageBytes);  // W and X bytes: X may follow later
        sm90::tma_load_2d(ring + stage * C::kStageBytes, &tm_w, &full[stage], kb * kS2BK, tile * kS2BM);
      };
      auto load_x = [&](int i) {
        const int stage = i % ST, kb = kb0 + i % nkb;
        sm90::tma_load_2d(ring + stage * C::kStageBytes + C::kWBytes, &tm_x, &full[stage], kb * kS2BK, 0);
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
    __syncwarp();
  } else {
    pdl_wait();  // Y (read when accumulating, written) belongs to the previous kernel until then
    const int gid = lane >> 2, tig = lane & 3;
    float acc[2][4 * NT];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 4 * NT; ++c) acc[h][c] = 0.f;
    int i = 0, prev = -1;  // i: ring position; prev: the stage whose release waits for wgmma_wait<1>
    for (int tt = 0; tt < my_tiles; ++tt) {
      for (int kb = 0; kb < nkb; ++kb, ++i) {
        const int stage = i % ST;
        sm90::mbar_wait(&full[stage], (i / ST) & 1);
        const uint8_t* sw = ring + stage * C::kStageBytes;
        const uint8_t* sx = sw + C::kWBytes;
        sm90::wgmma_fence();
#pragma unroll
        for (int k = 0; k < kS2BK / 16; ++k) {  // k16 steps: 32 bytes along the swizzled rows
          const uint64_t db = sm90::desc_k_major_sw128(sx + 32 * k);
          wgmma_m64k16<8 * NT>(acc[0], sm90::desc_k_major_sw128(sw + 32 * k), db, 1);
          wgmma_m64k16<8 * NT>(acc[1], sm90::desc_k_major_sw128(sw + 64 * 128 + 32 * k), db, 1);
        }
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();  // the previous item's wgmmas are done: release its stage
        if (prev >= 0 && lane == 0) sm90::mbar_arrive(&empty[prev]);
        prev = stage;
      }
      sm90::wgmma_wait<0>();
      if (prev >= 0 && lane == 0) sm90::mbar_arrive(&empty[prev]);
      prev = -1;
      if (S > 1) break;  // one tile per CTA: the cluster reduction below
      const int n_base = (worker + tt * workers) * kS2BM + 16 * warp + gid;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int n = n_base + 64 * h + 8 * (c >> 1), t = 8 * j + 2 * tig + (c & 1);
            if (t < T && n < N) {
              float v = acc[h][4 * j + c];
              if (bias != nullptr) v += __ldg(bias + n);
              float* y = Y + size_t(t) * N + n;
              *y = accumulate ? *y + v : v;
            }
            acc[h][4 * j + c] = 0.f;
          }
    }
    if (S > 1) {
      // every consumer warp's wgmmas are done with the ring before any warp overwrites it
      consumer_barrier();
      float* red = reinterpret_cast<float*>(ring);  // [token][W row of the tile]
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            red[(8 * j + 2 * tig + (c & 1)) * kS2RedLd + 64 * h + 16 * warp + gid + 8 * (c >> 1)] = acc[h][4 * j + c];
    }
  }
  if (S == 1) return;

  // K split over the cluster (grid.x = S = cluster size, one tile per CTA): rank r adds its slice
  // of the T x 128 outputs over the ranks in order 0..S-1, then bias, then the old Y.
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every rank's partial tile written
  const float* red = reinterpret_cast<const float*>(ring);
  const float* part[kS2MaxSplits];
#pragma unroll
  for (int q = 0; q < kS2MaxSplits; ++q) part[q] = cluster.map_shared_rank(red, q < S ? q : 0);
  const int rank = int(cluster.block_rank());
  const int n0 = worker * kS2BM;
  constexpr int kQuads = kS2BM / 4;  // float4s per token row of the tile
  const int F = T * kQuads;
  const bool vec = N % 4 == 0 && (reinterpret_cast<uintptr_t>(Y) | reinterpret_cast<uintptr_t>(bias)) % 16 == 0;
  const int f_end = int(int64_t(F) * (rank + 1) / S);
#pragma unroll 2
  for (int f = int(int64_t(F) * rank / S) + tid; f < f_end; f += kS2Threads) {
    const int t = f / kQuads, r = (f - t * kQuads) * 4, n = n0 + r;
    float4 v = *reinterpret_cast<const float4*>(part[0] + t * kS2RedLd + r);
#pragma unroll
    for (int q = 1; q < kS2MaxSplits; ++q) {
      if (q >= S) break;
      const float4 p = *reinterpret_cast<const float4*>(part[q] + t * kS2RedLd + r);
      v.x += p.x, v.y += p.y, v.z += p.z, v.w += p.w;
    }
    float o[4] = {v.x, v.y, v.z, v.w};
    float* y = Y + size_t(t) * N + n;
    if (vec && n < N) {  // N % 4 == 0: all four in range
      if (bias != nullptr) {
        const float4 b = __ldg(reinterpret_cast<const float4*>(bias + n));
        o[0] += b.x, o[1] += b.y, o[2] += b.z, o[3] += b.w;
      }
      if (accumulate) {
        const float4 old = *reinterpret_cast<const float4*>(y);
        o[0] += old.x, o[1] += old.y, o[2] += old.z, o[3] += old.w;
      }
      *reinterpret_cast<float4*>(y) = make_float4(o[0], o[1], o[2], o[3]);
    } else if (!vec) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (n + c >= N) break;
        float w = o[c] + (bias != nullptr ? __ldg(bias + n + c) : 0.f);
        y[c] = accumulate ? y[c] + w : w;
      }
    }
  }
  cluster.sync();  // no CTA exits while another rank reads its shared memory
}

// ---- host -------------------------------------------------------------------------------------

inline PFN_cuTensorMapEncodeTiled_v12000 skinny2_encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    DC_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    DC_CHECK(q == cudaDriverEntryPointSuccess && p != nullptr, "cuTensorMapEncodeTiled not found in the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// [rows, K] bf16 row-major as a TMA tensor: boxes of 64 k x box_rows rows, 128B swizzle, zeros
// outside the tensor. Host only (no stream work), so it is also fine during graph capture.
inline CUtensorMap skinny2_map(const void* base, int rows, int K, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(K) * 2};
  const cuuint32_t box[2] = {cuuint32_t(kS2BK), cuuint32_t(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = skinny2_encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims,
                                         strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                         CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  DC_CHECK(r == CUDA_SUCCESS, "gemm skinny2: cuTensorMapEncodeTiled failed with code " + std::to_string(int(r)));
  return map;
}

// The dynamic shared-memory opt-in, once per device (expert parallelism drives several GPUs).
template <int NT>
void skinny2_opt_in() {
  static std::atomic<uint64_t> opted{0};
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (opted.load() & bit)) return;
  DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_skinny2<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               Skinny2Cfg<NT>::kSmem));
  opted.fetch_or(bit);
}

// Clusters of S CTAs resident on the device at once (an idle one), cached per device and S. A
// query, not stream work: legal while the stream captures a graph.
template <int NT>
int skinny2_max_clusters(int S) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cache;
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  const auto it = cache.find({dev, S});
  if (it != cache.end()) return it->second;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(S, 1);
  cfg.blockDim = dim3(kS2Threads);
  cfg.dynamicSmemBytes = Skinny2Cfg<NT>::kSmem;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = S, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int n = 0;
  // a cluster shape the device refuses counts as none resident (that S is then not chosen)
  if (cudaOccupancyMaxActiveClusters(&n, sm90_bf16_gemm_skinny2<NT>, &cfg) != cudaSuccess) {
    n = 0;
    (void)cudaGetLastError();
  }
  cache[{dev, S}] = n;
  return n;
}

// K splits (cluster size): 1 when the tiles cover the SMs, else the largest S <= 8 with >= 2 k
// blocks per split for which tiles x S CTAs fit the SMs (one CTA each) and `tiles` clusters of S
// fit the GPU at once.
template <int NT>
int skinny2_splits(int tiles, int k_blocks, int sms) {
  if (tiles >= sms) return 1;
  int best = 1;
  for (int S = 2; S <= kS2MaxSplits && tiles * S <= sms && 2 * S <= k_blocks; ++S)
    if (skinny2_max_clusters<NT>(S) >= tiles) best = S;
  return best;
}

// The launch's shape: K splits (cluster size) and CTAs along the tiles (grid = splits x ctas_y).
template <int NT>
void skinny2_plan(int K, int N, int splits, int& S, int& ctas_y) {
  skinny2_opt_in<NT>();
  static const int sms = sm_count();
  const int tiles = (N + kS2BM - 1) / kS2BM, k_blocks = (K + kS2BK - 1) / kS2BK;
  DC_CHECK(tiles <= 65535, "gemm skinny2: N must be below 65536 x 128");
  S = splits > 0 ? splits : skinny2_splits<NT>(tiles, k_blocks, sms);
  S = std::max(1, std::min({S, kS2MaxSplits, k_blocks}));
  ctas_y = S > 1 ? tiles : std::min(tiles, sms);
}

template <int NT>
void launch_skinny2_nt(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                       bool accumulate, int splits, cudaStream_t s) {
  int S = 1, ctas_y = 1;
  skinny2_plan<NT>(K, N, splits, S, ctas_y);
  const CUtensorMap tm_w = skinny2_map(W, N, K, kS2BM);
  const CUtensorMap tm_x = skinny2_map(X, T, K, 8 * NT);
  launch_kc(sm90_bf16_gemm_skinny2<NT>, dim3(S, ctas_y), dim3(kS2Threads), Skinny2Cfg<NT>::kSmem, s, dim3(S, 1, 1), tm_w,
            tm_x, T, N, (K + kS2BK - 1) / kS2BK, bias, Y, accumulate);
}

// splits: 0 picks (skinny2_splits); otherwise the cluster size, clamped to 1..8 and the k blocks.
inline void launch_skinny2(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                           bool accumulate, int splits, cudaStream_t s) {
  DC_CHECK(T > 0 && T <= 64 && K > 0 && N > 0, "gemm skinny2: T must be 1..64, K and N > 0");
  if (T <= 8) launch_skinny2_nt<1>(X, T, K, W, N, bias, Y, accumulate, splits, s);
  else if (T <= 16) launch_skinny2_nt<2>(X, T, K, W, N, bias, Y, accumulate, splits, s);
  else if (T <= 32) launch_skinny2_nt<4>(X, T, K, W, N, bias, Y, accumulate, splits, s);
  else launch_skinny2_nt<8>(X, T, K, W, N, bias, Y, accumulate, splits, s);
}

// What a launch at (T, K, N) would use, for the harness: K splits, CTAs, ring stages, shared memory.
template <int NT>
void skinny2_info_nt(int K, int N, int& splits, int& ctas, int& stages, int& smem) {
  int y = 1;
  skinny2_plan<NT>(K, N, 0, splits, y);
  ctas = splits * y, stages = kS2Stages, smem = Skinny2Cfg<NT>::kSmem;
}

inline void skinny2_info(int T, int K, int N, int& splits, int& ctas, int& stages, int& smem) {
  if (T <= 8) skinny2_info_nt<1>(K, N, splits, ctas, stages, smem);
  else if (T <= 16) skinny2_info_nt<2>(K, N, splits, ctas, stages, smem);
  else if (T <= 32) skinny2_info_nt<4>(K, N, splits, ctas, stages, smem);
  else skinny2_info_nt<8>(K, N, splits, ctas, stages, smem);
}

}  // namespace mma
}  // namespace dcuda
