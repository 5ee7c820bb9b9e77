// Host launcher for the W8A16 tensor-core grouped GEMM (sm90_w8a16_grouped_gemm_wgmma.cuh): picks the
// token tile from the caller's rows-per-expert hint, builds the two tensor maps (X as [M, K] bf16,
// W as [E*N, K] int8, 128B swizzle) and launches at most CTAS persistent CTAs per multiprocessor
// (2 for token tiles <= 64 unless there is about one work item per SM, 1 for 128 and 192;
// DK_W8A16_CTAS_PER_SM=1|2 overrides it at tiles <= 64, for
// A/B runs; 3 CTAs per SM at tiles <= 16 were measured and dropped: docs/kernels.md, session 6). At token tiles of
// 8 and 16 a launch with fewer items than SMs runs in clusters that split K (swapab_split_k, cluster_split_k.cuh).
#include <cstdlib>
#include <type_traits>
#include "grouped_gemm.h"
#include "sm90_w8a16_grouped_gemm_wgmma.cuh"
#include "../common/check.h"
#include "../common/launch.h"
#include "../common/tensor_map.h"

namespace dispatch {
namespace {

template <int NTOK, int CTAS>
void launch_w8_wgmma(const void* X, const int8_t* W, const float* scales, void* Y, const int* offsets, int M, int E,
                     int N, int K, cudaStream_t stream, bool fuse_silu, bool routing_ready, int sms, int64_t items) {
  using T = W8Tile<NTOK, CTAS>;
  opt_in_smem_once<sm90_w8a16_grouped_gemm_wgmma_kernel<NTOK, CTAS, 1>>(T::kSmemBytes);
  const CUtensorMap tm_x = make_tensor_map_2d(X, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, uint64_t(M), uint64_t(K), 64, NTOK);
  const CUtensorMap tm_w =
      make_tensor_map_2d(W, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(E) * N, uint64_t(K), T::kK, T::kRows);
  const int grid = int(std::min<int64_t>(int64_t(sms) * CTAS, items));
  launch_pdl(sm90_w8a16_grouped_gemm_wgmma_kernel<NTOK, CTAS, 1>, dim3(grid), dim3(T::kThreads), T::kSmemBytes, stream,
             tm_x, tm_w, scales, static_cast<__nv_bfloat16*>(Y), offsets, E, N, K, int(fuse_silu), int(routing_ready));
  DK_LAUNCHED();
}

// Clusters of SPLIT CTAs (one per SM) sharing each item's k blocks; grid = min(items, clusters that fit) clusters.
template <int NTOK, int SPLIT>
bool launch_w8_wgmma_split(const void* X, const int8_t* W, const float* scales, void* Y, const int* offsets, int M,
                           int E, int N, int K, cudaStream_t stream, bool fuse_silu, bool routing_ready,
                           int64_t items, bool forced) {
  using T = W8Tile<NTOK, 1, SPLIT>;
  constexpr auto kernel = sm90_w8a16_grouped_gemm_wgmma_kernel<NTOK, 1, SPLIT>;
  const int clusters = split_k_clusters<kernel>("w8a16", SPLIT, T::kThreads, T::kSmemBytes, items, forced);
  if (clusters == 0) return false;
  const CUtensorMap tm_x = make_tensor_map_2d(X, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, uint64_t(M), uint64_t(K), 64, NTOK);
  const CUtensorMap tm_w =
      make_tensor_map_2d(W, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(E) * N, uint64_t(K), T::kK, T::kRows);
  launch_pdl_cluster(kernel, dim3(clusters * SPLIT), dim3(T::kThreads), T::kSmemBytes, SPLIT, stream, tm_x, tm_w,
                     scales, static_cast<__nv_bfloat16*>(Y), offsets, E, N, K, int(fuse_silu), int(routing_ready));
  DK_LAUNCHED();
  return true;
}

template <int NTOK>
void launch_w8_wgmma_ctas(const void* X, const int8_t* W, const float* scales, void* Y, const int* offsets, int M,
                          int E, int N, int K, cudaStream_t stream, bool fuse_silu, bool routing_ready) {
  const int sms = current_device_sms();
  if constexpr (NTOK <= kSwapAbMaxSplitTile) {  // fewer items than SMs: clusters split K (swapab_split_k)
    const int64_t tight = swapab_items_tight(NTOK, M, E, N);
    bool forced = false;
    switch (swapab_split_for_launch(NTOK, tight, K / W8Tile<NTOK>::kK, sms, &forced)) {
      case 2:
        if (launch_w8_wgmma_split<NTOK, 2>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready,
                                           tight, forced))
          return;
        break;
      case 4:
        if (launch_w8_wgmma_split<NTOK, 4>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready,
                                           tight, forced))
          return;
        break;
      default: break;
    }
  }
  const int64_t items = expert_items_bound(NTOK, W8Tile<NTOK>::kRows, M, E, N);
  const char* env = std::getenv("DK_W8A16_CTAS_PER_SM");  // per launch: the benchmark flips it between methods
  const int ctas =
      env && (env[0] == '1' || env[0] == '2') ? env[0] - '0' : w8a16_wgmma_ctas_per_sm(NTOK, M, E, N, sms);
  if constexpr (NTOK <= 64)  // two CTAs of 128 tokens would hold two stages each
    if (ctas == 2)
      return launch_w8_wgmma<NTOK, 2>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready, sms,
                                      items);
  return launch_w8_wgmma<NTOK, 1>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready, sms, items);
}

}  // namespace

// Two CTAs per SM halve each CTA's ring. When the work items (output tile x token tile, bounded from M
// and E on the host) are fewer than the SMs, as at 1-2 tokens, nothing is left for the second CTA to
// overlap and the half ring only costs bytes in flight: H200, 2026-11-30 04:03 UTC benchmark at T = 1,
// one CTA was 1.2-1.5x faster on the shapes with <= 1.1 items per SM (Qwen3-30B-A3B, OLMoE, Mixtral
// down) and within 10% elsewhere (docs/kernels.md, session 7). Since session 9 the bound is swapab_items_tight
// (one partial token tile per expert that can have rows), which moved Mixtral down at two tokens (128 items) to
// one CTA: 68.8 vs 108.6 us (2026-12-01) and 59.1 vs 94.6 us (session 8's run), no other row of either run changed.
int w8a16_wgmma_ctas_per_sm(int ntok, int M, int E, int N, int sms) {
  if (ntok > 64) return 1;
  return swapab_items_tight(ntok, M, E, N) < sms ? 1 : 2;
}

// Token tile from the rows-per-expert hint. Each token tile of an expert re-reads the expert's weight
// tile and converts it again, so a wider tile halves both per token; past the hint it only multiplies
// padded tensor work. H200 (docs/kernels.md, session 7): 64-token tiles at two CTAs per SM beat 128 at
// one up to hints of ~96 (1.3-1.4x at OLMoE T = 256 and DeepSeek-V3 T = 1024) and lose above;
// 192-token tiles take the prefill sizes (hints above 256).
int w8a16_wgmma_token_tile(int rows_hint) {
  if (rows_hint <= 8) return 8;
  if (rows_hint <= 16) return 16;
  if (rows_hint <= 32) return 32;
  if (rows_hint <= 96) return 64;
  if (rows_hint <= 256) return 128;
  return 192;
}

void sm90_w8a16_grouped_gemm_contiguous(const void* X, const int8_t* W, const float* scales, void* Y,
                                        const int* offsets, int M, int E, int N, int K, int rows_hint,
                                        cudaStream_t stream, bool fuse_silu, bool routing_ready) {
  DK_CHECK(E > 0 && E <= W8Tile<16>::kMaxExperts, "E must be in [1, 1024]");
  DK_CHECK(N > 0 && K > 0 && N % 128 == 0 && K % 128 == 0, "the W8A16 tensor-core GEMM needs N and K positive multiples of 128");
  DK_CHECK((reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0,
           "X and W must be 16-byte aligned");
  if (M == 0) return;
  routing_ready = routing_ready && !early_weights_off();
  // DK_W8A16_TOKEN_TILE=8|16|32|64|128|192 forces the token tile whatever the hint (an A/B switch read
  // per launch, like DK_W8A16_CTAS_PER_SM; other values are ignored)
  int tile = w8a16_wgmma_token_tile(rows_hint);
  if (const char* env = std::getenv("DK_W8A16_TOKEN_TILE")) {
    const int t = std::atoi(env);
    if (t == 8 || t == 16 || t == 32 || t == 64 || t == 128 || t == 192) tile = t;
  }
  switch (tile) {
    case 8: return launch_w8_wgmma_ctas<8>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    case 16: return launch_w8_wgmma_ctas<16>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    case 32: return launch_w8_wgmma_ctas<32>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    case 64: return launch_w8_wgmma_ctas<64>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    case 128: return launch_w8_wgmma_ctas<128>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    default: return launch_w8_wgmma_ctas<192>(X, W, scales, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
  }
}

}  // namespace dispatch
