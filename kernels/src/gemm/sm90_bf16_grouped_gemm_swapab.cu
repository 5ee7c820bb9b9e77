// Host launcher for the bf16 swap-AB grouped GEMM (sm90_bf16_grouped_gemm_swapab.cuh): the token tile from
// the caller's rows-per-expert hint, the two tensor maps (X as [M, K], W as [E*N, K], bf16, 128B swizzle),
// and one persistent CTA per multiprocessor. DK_BF16_SWAPAB_TOKEN_TILE=8|16|32|64 and
// DK_BF16_SWAPAB_CTAS_PER_SM=1|2 force the tile and the CTAs (A/B switches read per launch). At token tiles of 8
// and 16 a launch with fewer items than SMs runs in clusters that split K (swapab_split_k, cluster_split_k.cuh).
#include <algorithm>
#include <cstdlib>
#include "grouped_gemm.h"
#include "sm90_bf16_grouped_gemm_swapab.cuh"
#include "../common/check.h"
#include "../common/launch.h"
#include "../common/tensor_map.h"

namespace dispatch {
namespace {

template <int NTOK, int CTAS>
void launch_swapab(const void* X, const void* W, void* Y, const int* offsets, int M, int E, int N, int K,
                   cudaStream_t stream, bool fuse_silu, bool routing_ready, int sms, int64_t items) {
  using T = SwapAbTile<NTOK, CTAS>;
  opt_in_smem_once<sm90_bf16_grouped_gemm_swapab_kernel<NTOK, CTAS, 1>>(T::kSmemBytes);
  const CUtensorMap tm_x = make_tensor_map_2d(X, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, uint64_t(M), uint64_t(K), T::kK, NTOK);
  const CUtensorMap tm_w =
      make_tensor_map_2d(W, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, uint64_t(E) * N, uint64_t(K), T::kK, T::kRows);
  const int grid = int(std::min<int64_t>(int64_t(sms) * CTAS, items));
  launch_pdl(sm90_bf16_grouped_gemm_swapab_kernel<NTOK, CTAS, 1>, dim3(grid), dim3(T::kThreads), T::kSmemBytes, stream,
             tm_x, tm_w, static_cast<__nv_bfloat16*>(Y), offsets, E, N, K, int(fuse_silu), int(routing_ready));
  DK_LAUNCHED();
}

// Clusters of SPLIT CTAs (one per SM) sharing each item's k blocks; grid = min(items, clusters that fit) clusters.
template <int NTOK, int SPLIT>
bool launch_swapab_split(const void* X, const void* W, void* Y, const int* offsets, int M, int E, int N, int K,
                         cudaStream_t stream, bool fuse_silu, bool routing_ready, int64_t items, bool forced) {
  using T = SwapAbTile<NTOK, 1, SPLIT>;
  constexpr auto kernel = sm90_bf16_grouped_gemm_swapab_kernel<NTOK, 1, SPLIT>;
  const int clusters = split_k_clusters<kernel>("bf16", SPLIT, T::kThreads, T::kSmemBytes, items, forced);
  if (clusters == 0) return false;
  const CUtensorMap tm_x = make_tensor_map_2d(X, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, uint64_t(M), uint64_t(K), T::kK, NTOK);
  const CUtensorMap tm_w =
      make_tensor_map_2d(W, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, uint64_t(E) * N, uint64_t(K), T::kK, T::kRows);
  launch_pdl_cluster(kernel, dim3(clusters * SPLIT), dim3(T::kThreads), T::kSmemBytes, SPLIT, stream, tm_x, tm_w,
                     static_cast<__nv_bfloat16*>(Y), offsets, E, N, K, int(fuse_silu), int(routing_ready));
  DK_LAUNCHED();
  return true;
}

template <int NTOK>
void launch_swapab_ctas(const void* X, const void* W, void* Y, const int* offsets, int M, int E, int N, int K,
                        cudaStream_t stream, bool fuse_silu, bool routing_ready) {
  const int sms = current_device_sms();
  if constexpr (NTOK <= kSwapAbMaxSplitTile) {
    const int64_t tight = swapab_items_tight(NTOK, M, E, N);
    bool forced = false;
    switch (swapab_split_for_launch(NTOK, tight, K / SwapAbTile<NTOK>::kK, sms, &forced)) {
      case 2:
        if (launch_swapab_split<NTOK, 2>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready, tight,
                                         forced))
          return;
        break;
      case 4:
        if (launch_swapab_split<NTOK, 4>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready, tight,
                                         forced))
          return;
        break;
      default: break;
    }
  }
  const int64_t items = expert_items_bound(NTOK, SwapAbTile<NTOK>::kRows, M, E, N);
  const char* env = std::getenv("DK_BF16_SWAPAB_CTAS_PER_SM");
  if (env && env[0] == '2')
    return launch_swapab<NTOK, 2>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready, sms, items);
  return launch_swapab<NTOK, 1>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready, sms, items);
}

}  // namespace

// H200, 2026-11-30 05:28 UTC (docs/kernels.md, session 8; 160 rows, T = 1-128): one CTA per SM with the whole
// ring beat two CTAs with half rings each at T <= 16 (median share of HBM 77-96% vs 74-93%) and tied above;
// tiles of 16-64 tokens were within a few percent of each other at T <= 64, and a 128-token tile (one CTA,
// 7 stages) lost to 64 at T = 128 (Mixtral: 75-78% vs 77-94%), so hints above 32 take 64 and 128 is gone.
int bf16_swapab_token_tile(int rows_hint) {
  if (rows_hint <= 8) return 8;
  if (rows_hint <= 16) return 16;
  if (rows_hint <= 32) return 32;
  return 64;
}

void sm90_bf16_grouped_gemm_swapab(const void* X, const void* W, void* Y, const int* offsets, int M, int E, int N,
                                   int K, int rows_hint, cudaStream_t stream, bool fuse_silu, bool routing_ready) {
  DK_CHECK(E > 0 && E <= SwapAbTile<16>::kMaxExperts, "E must be in [1, 1024]");
  DK_CHECK(N > 0 && K > 0 && N % 128 == 0 && K % 64 == 0,
           "the bf16 swap-AB GEMM needs N a positive multiple of 128 and K of 64");
  DK_CHECK((reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0,
           "X and W must be 16-byte aligned");
  if (M == 0) return;
  routing_ready = routing_ready && !early_weights_off();
  int tile = bf16_swapab_token_tile(rows_hint);
  if (const char* env = std::getenv("DK_BF16_SWAPAB_TOKEN_TILE")) {
    const int t = std::atoi(env);
    if (t == 8 || t == 16 || t == 32 || t == 64) tile = t;
  }
  switch (tile) {
    case 8: return launch_swapab_ctas<8>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    case 16: return launch_swapab_ctas<16>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    case 32: return launch_swapab_ctas<32>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
    default: return launch_swapab_ctas<64>(X, W, Y, offsets, M, E, N, K, stream, fuse_silu, routing_ready);
  }
}

}  // namespace dispatch
