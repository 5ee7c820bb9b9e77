// sm90_bf16_gemm_stream (GemmPath::Stream, decode batches of T <= 64): Y[T, N] (+)= X[T, K] .
// W[N, K]^T (+ bias[N]), bf16 in, fp32 out; K % 8 == 0 and X, W 16-byte aligned (the caller checks).
//
// Bandwidth-bound: every byte of W is read once, so the kernel is built to keep HBM busy.
// - A CTA owns 128 rows of W (the MMA's A operand) and all T tokens (the B operand, NT n8 tiles,
//   T <= 8 NT), over one K range; its 8 warps are 4 along W's rows (32 each) x 2 along k. W and
//   X tiles of 64 k go through a 4-5 stage cp.async ring (16 KB of W per stage, 48-64 KB in
//   flight per CTA, two CTAs per SM), then ldmatrix + mma.sync. X is re-read from L2 by every
//   CTA (T / 128 of W's bytes).
// - The first stages' W loads are issued before griddepcontrol.wait (weights are never written);
//   X's after it.
// - When the N tiles alone would not give every SM a CTA (qkv: 40 tiles, o_proj: 16), K is split
//   over the CTAs of a thread-block cluster (grid.y = cluster size <= 8). Each CTA leaves its
//   partial tile in its shared memory; after a cluster barrier, CTA r adds slice r of the tile
//   over the ranks in rank order (distributed shared memory) and writes Y once. No atomics, no
//   memset of Y, and the fp32 sums have a fixed order: the result is the same bits run to run.
// Legend: T tokens, N output features, K input features, NT n8 token tiles; gid = lane / 4,
// tig = lane % 4.
#pragma once
#include <cooperative_groups.h>
#include <atomic>
#include "gemm_mma.cuh"

namespace dcuda {
namespace mma {

constexpr int kStBM = 128;                  // W rows per CTA (4 warps x 2 m16 tiles)
constexpr int kStBK = 64;                   // k per ring stage
constexpr int kStLd = kStBK + 8;            // smem row stride in bf16 (144 B: ldmatrix rows on distinct banks)
constexpr int kStThreads = 256;
constexpr int kStMaxCluster = 8;            // portable cluster size
constexpr int kStRedLd = kStBM + 4;         // partial tile row stride in floats
__host__ __device__ constexpr int st_stages(int NT) { return NT >= 4 ? 4 : 5; }
// two CTAs per SM fit (2 x (110.6 KB + 1 KB reserved) <= 228 KB at NT = 8)
__host__ __device__ constexpr int st_smem(int NT) { return st_stages(NT) * (kStBM + 8 * NT) * kStLd * int(sizeof(bf16)); }
static_assert(2 * 8 * 8 * kStRedLd * 4 <= st_smem(8) && 2 * 8 * kStRedLd * 4 <= st_smem(1),
              "the two partial tiles must fit in the ring");

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const bf16* smem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}

template <int NT>
__global__ void __launch_bounds__(kStThreads, 2) sm90_bf16_gemm_stream(const bf16* __restrict__ X, int T, int K,
                                                                      const bf16* __restrict__ W, int N,
                                                                      const float* __restrict__ bias,
                                                                      float* __restrict__ Y, bool accumulate,
                                                                      int k_chunk) {
  constexpr int TP = 8 * NT, S = st_stages(NT);
  constexpr int kStage = (kStBM + TP) * kStLd;  // bf16 per stage: W tile, then X tile
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* ring = reinterpret_cast<bf16*>(smem_raw);
  pdl_trigger();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
  const int n0 = blockIdx.x * kStBM;
  const int k_begin = blockIdx.y * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  const int nk = k_end > k_begin ? (k_end - k_begin + kStBK - 1) / kStBK : 0;

  // 16-byte chunks, 8 per 64-k row; past N, T or the K range: zeros, nothing read
  auto load_w = [&](int slot, int kb) {
    bf16* sw = ring + slot * kStage;
    const int k0 = k_begin + kb * kStBK;
#pragma unroll
    for (int c = 0; c < kStBM * 8 / kStThreads; ++c) {
      const int chunk = tid + c * kStThreads;
      const int r = chunk >> 3, cc = (chunk & 7) * 8;
      const int k = k0 + cc, gn = n0 + r;
      const bool in = gn < N && k < k_end;
      cp_async16(sw + r * kStLd + cc, W + (in ? size_t(gn) * K + k : 0), in ? 16 : 0);
    }
  };
  auto load_x = [&](int slot, int kb) {
    bf16* sx = ring + slot * kStage + kStBM * kStLd;
    const int k0 = k_begin + kb * kStBK;
#pragma unroll
    for (int c = 0; c < (TP * 8 + kStThreads - 1) / kStThreads; ++c) {
      const int chunk = tid + c * kStThreads;
      if (chunk >= TP * 8) break;
      const int r = chunk >> 3, cc = (chunk & 7) * 8;
      const int k = k0 + cc;
      const bool in = r < T && k < k_end;
      cp_async16(sx + r * kStLd + cc, X + (in ? size_t(r) * K + k : 0), in ? 16 : 0);
    }
  };

  // commit groups: W of stages 0..S-2, X of stages 0..S-2, then one per iteration; the group
  // holding stage kb's X is the (S - 1 + kb)-th either way, so wait_group S-2 covers stage kb
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < nk) load_w(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  pdl_wait();
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < nk) load_x(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }

  // warp (wm, wk): W rows wm .. wm + 31 (two m16 tiles) x k16 steps 2wk, 2wk + 1 of each stage, so
  // each warp reads X's tile for half the stage only (X, not W, dominates shared-memory reads)
  float acc[2][NT][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;
  const int wm = (warp & 3) * 32, wk = warp >> 2;
  for (int kb = 0; kb < nk; ++kb) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 2) : "memory");
    __syncthreads();  // stage kb landed for every thread; the slot read last iteration is free
    const int next = kb + S - 1;
    if (next < nk) {
      load_w(next % S, next);
      load_x(next % S, next);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    const bf16* sw = ring + (kb % S) * kStage;
    const bf16* sx = sw + kStBM * kStLd;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      const int kk = wk * 32 + ks * 16;
      uint32_t a[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) ldmatrix_x4(a[i], sw + (wm + 16 * i + (lane & 15)) * kStLd + kk + (lane >> 4) * 8);
#pragma unroll
      for (int p = 0; p < NT / 2; ++p) {
        uint32_t b[4];
        ldmatrix_x4(b, sx + (16 * p + (lane >> 4) * 8 + (lane & 7)) * kStLd + kk + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          mma_bf16(acc[i][2 * p], a[i][0], a[i][1], a[i][2], a[i][3], b[0], b[1]);
          mma_bf16(acc[i][2 * p + 1], a[i][0], a[i][1], a[i][2], a[i][3], b[2], b[3]);
        }
      }
      if constexpr (NT % 2 == 1) {
        uint32_t b[2];
        ldmatrix_x2(b, sx + (8 * (NT - 1) + (lane & 7)) * kStLd + kk + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int i = 0; i < 2; ++i) mma_bf16(acc[i][NT - 1], a[i][0], a[i][1], a[i][2], a[i][3], b[0], b[1]);
      }
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();  // the ring is free: it becomes the partial tiles red[wk][t][r]

  // acc[i][j][c]: W row wm + 16i + gid (+ 8 for c >= 2), token 8j + 2tig (+ 1 for odd c)
  float* red = reinterpret_cast<float*>(smem_raw);
  auto at = [&](int i, int j, int c) {
    return (8 * j + 2 * tig + (c & 1)) * kStRedLd + wm + 16 * i + gid + 8 * (c >> 1);
  };
  if (wk == 1) {
    float* r1 = red + TP * kStRedLd;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) r1[at(i, j, c)] = acc[i][j][c];
  }
  __syncthreads();
  if (wk == 0) {  // the CTA's partial tile: K half 0 + K half 1, in that order
    const float* r1 = red + TP * kStRedLd;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) red[at(i, j, c)] = acc[i][j][c] + r1[at(i, j, c)];
  }
  // grid.y > 1 only when launched as clusters of (1, grid.y, 1) (launch_stream_nt)
  namespace cg = cooperative_groups;
  const bool clustered = gridDim.y > 1;
  int cs = 1, rank = 0;
  if (clustered) {
    cg::cluster_group cluster = cg::this_cluster();
    cs = int(cluster.num_blocks()), rank = int(cluster.block_rank());
    cluster.sync();  // every rank's partial tile written (a CTA barrier too)
  } else {
    __syncthreads();
  }
  const int E = T * kStBM;
  const int e_end = int(int64_t(E) * (rank + 1) / cs);
  for (int e = int(int64_t(E) * rank / cs) + tid; e < e_end; e += kStThreads) {
    const int t = e / kStBM, r = e - t * kStBM, n = n0 + r;
    if (n >= N) continue;
    float v = red[t * kStRedLd + r];
    if (clustered) {
      cg::cluster_group cluster = cg::this_cluster();
      v = 0.f;
      for (int q = 0; q < cs; ++q) v += cluster.map_shared_rank(red, q)[t * kStRedLd + r];
    }
    if (bias != nullptr) v += bias[n];
    float* y = Y + size_t(t) * N + n;
    *y = accumulate ? *y + v : v;
  }
  if (clustered) cg::this_cluster().sync();  // no CTA exits while another rank reads its shared memory
}

// Cluster size (K splits): the fewest of 1, 2, 4, 8 that give >= 90% of the SMs a CTA while
// every split keeps >= 2 stages of K.
inline int stream_splits(int tiles, int k_blocks, int sms) {
  int cs = 1;
  while (cs < kStMaxCluster && tiles * cs * 10 < sms * 9 && k_blocks / (2 * cs) >= 2) cs *= 2;
  return cs;
}

template <int NT>
void launch_stream_nt(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                      bool accumulate, int splits, cudaStream_t s) {
  constexpr int smem = st_smem(NT);
  static std::atomic<uint64_t> opted{0};  // the opt-in holds per device (expert parallelism drives several)
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (!bit || !(opted.load() & bit)) {
    DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_stream<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    // all of the unified L1 as shared memory, so two CTAs fit per SM (nothing here goes through L1)
    DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_stream<NT>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 int(cudaSharedmemCarveoutMaxShared)));
    opted.fetch_or(bit);
  }
  static const int sms = sm_count();
  const int tiles = (N + kStBM - 1) / kStBM;
  const int k_blocks = (K + kStBK - 1) / kStBK;
  int cs = splits > 0 ? splits : stream_splits(tiles, k_blocks, sms);
  cs = std::max(1, std::min({cs, kStMaxCluster, k_blocks}));
  const int k_chunk = ((k_blocks + cs - 1) / cs) * kStBK;  // a trailing rank may get an empty range
  launch_kc(sm90_bf16_gemm_stream<NT>, dim3(tiles, cs), dim3(kStThreads), smem, s, dim3(1, cs, 1), X, T, K, W, N, bias, Y,
            accumulate, k_chunk);
}

// What a launch at (T, K, N) would use: the cluster size, CTAs resident per SM, and how many
// clusters of that size fit on the GPU at once (0 when launched without clusters). For the harness.
template <int NT>
void stream_info_nt(int K, int N, int& cluster, int& per_sm, int& max_clusters) {
  constexpr int smem = st_smem(NT);
  DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_stream<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_stream<NT>, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared)));
  DC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sm90_bf16_gemm_stream<NT>, kStThreads, smem));
  const int tiles = (N + kStBM - 1) / kStBM, k_blocks = (K + kStBK - 1) / kStBK;
  cluster = std::max(1, std::min({stream_splits(tiles, k_blocks, sm_count()), kStMaxCluster, k_blocks}));
  max_clusters = 0;
  if (cluster > 1) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(tiles, cluster);
    cfg.blockDim = dim3(kStThreads);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1, attr.val.clusterDim.y = cluster, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    DC_CUDA(cudaOccupancyMaxActiveClusters(&max_clusters, sm90_bf16_gemm_stream<NT>, &cfg));
  }
}

inline void stream_info(int T, int K, int N, int& cluster, int& per_sm, int& max_clusters) {
  if (T <= 8) stream_info_nt<1>(K, N, cluster, per_sm, max_clusters);
  else if (T <= 16) stream_info_nt<2>(K, N, cluster, per_sm, max_clusters);
  else if (T <= 32) stream_info_nt<4>(K, N, cluster, per_sm, max_clusters);
  else stream_info_nt<8>(K, N, cluster, per_sm, max_clusters);
}

// splits: 0 picks (stream_splits); otherwise the cluster size, clamped to 1..8.
inline void launch_stream(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                          bool accumulate, int splits, cudaStream_t s) {
  DC_CHECK(T > 0 && T <= 64, "gemm stream: T must be 1..64");
  if (T <= 8) launch_stream_nt<1>(X, T, K, W, N, bias, Y, accumulate, splits, s);
  else if (T <= 16) launch_stream_nt<2>(X, T, K, W, N, bias, Y, accumulate, splits, s);
  else if (T <= 32) launch_stream_nt<4>(X, T, K, W, N, bias, Y, accumulate, splits, s);
  else launch_stream_nt<8>(X, T, K, W, N, bias, Y, accumulate, splits, s);
}

}  // namespace mma
}  // namespace dcuda
