// Path choice for the MoE grouped GEMM (see grouped_gemm.h).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include "grouped_gemm.h"
#include "../common/check.h"
#include "../common/launch.h"

namespace dispatch {

int moe_bf16_swapab_hint(int T, int M, int E) { return std::min(T, 2 * ((M + E - 1) / E) + 8); }

MoeBf16Path moe_bf16_path(int T, int M, int E, int N, int K, int sms, bool aligned16, bool swapab_enabled) {
  const int hint = 2 * ((M + E - 1) / E) + 8;  // rows per expert: twice the mean plus slack
  const bool fits = swapab_enabled && aligned16 && T <= kSwapAbMaxTokens && hint <= kSwapAbMaxHint && N % 128 == 0 &&
                    K % 64 == 0;
  // 1-2 tokens: the swap-AB kernel only when its work items (output tiles x experts that can have rows), times the
  // CTAs that split each one's K (Mixtral down at one token: 64 items in pairs), give about every SM one; with
  // fewer, idle SMs cost more than the small-M kernel's fixed latency chain
  if (fits && T <= kSmallMEntryMaxTokens) {
    const int tile = bf16_swapab_token_tile(moe_bf16_swapab_hint(T, M, E));
    const int64_t items = swapab_items_tight(tile, M, E, N);
    const int split = swapab_split_k(tile, items, K / 64, sms);
    if (items * split * 10 >= int64_t(sms) * 9) return MoeBf16Path::kSwapAb;
  } else if (fits) {
    return MoeBf16Path::kSwapAb;
  }
  return T <= kSmallMMaxTokens ? MoeBf16Path::kSmallM : MoeBf16Path::kContiguous;
}

int64_t swapab_items_tight(int token_tile, int M, int E, int N) {
  const int a = std::min(E, M);
  return int64_t(N / 128) * (a + (M - a) / token_tile);
}

// H200, 2026-12-01 23:19-23:25 UTC (docs/kernels.md, session 9): pairs with one item each (Mixtral down at one token, 64
// items) ran the W8A16 kernel 1.70x and the bf16 one 1.11-1.18x faster than unsplit; clusters taking several items
// in turn lost (Qwen3-30B-A3B gate_up at one token in clusters of 4: int8 21.7 vs 13.7 us, bf16 22.3 vs 18.5; 192
// items in pairs: 24.4 vs 21.0 us), so the rule splits only where every cluster gets at most one item, in pairs.
int swapab_split_k(int token_tile, int64_t items, int k_blocks, int sms) {
  return token_tile <= kSwapAbMaxSplitTile && items > 0 && items * 2 <= sms && k_blocks >= 8 ? 2 : 1;
}

int swapab_split_for_launch(int token_tile, int64_t items, int k_blocks, int sms, bool* forced) {
  *forced = false;
  if (const char* env = std::getenv("DK_SWAPAB_SPLIT_K")) {  // read per launch, like the kernels' other A/B switches
    const int s = std::atoi(env);
    if ((s == 1 || s == 2 || s == 4) && k_blocks >= s) {
      *forced = true;
      return s;
    }
  }
  return swapab_split_k(token_tile, items, k_blocks, sms);
}

int swapab_early_min_tokens() {
  const char* v = std::getenv("DK_SWAPAB_EARLY_MIN_TOKENS");
  return v != nullptr && *v ? std::atoi(v) : kSwapAbEarlyMinTokens;
}

bool early_weights_off() {
  const char* v = std::getenv("DK_SWAPAB_EARLY_WEIGHTS");
  return v != nullptr && v[0] == '0';
}

bool moe_gate_up_self_routed_supported(int E, int N, int K, const RouterConfig& cfg) {
  const char* off = std::getenv("DK_BF16_SWAPAB");
  // only where the bf16 entry runs the small-M kernel at one token anyway (the routed kernel is its schedule)
  return N % 16 == 0 && K % 64 == 0 && E >= 1 && E <= 512 && cfg.num_experts == E && cfg.top_k >= 1 &&
         cfg.top_k <= 32 && cfg.top_k <= E && cfg.num_groups >= 1 && cfg.num_groups <= 32 && E % cfg.num_groups == 0 &&
         cfg.topk_groups >= 1 && cfg.topk_groups <= cfg.num_groups && (cfg.num_groups == 1 || E / cfg.num_groups >= 2) &&
         moe_bf16_path(1, cfg.top_k, E, N, K, current_device_sms(), true, !(off && off[0] == '0')) == MoeBf16Path::kSmallM;
}

void moe_grouped_gemm_bf16(const void* X, const void* W, void* Y, const int* offsets, int M, int T, int E, int N,
                           int K, cudaStream_t stream, bool fuse_silu, bool routing_ready_before_wait) {
  // DK_BF16_SWAPAB=0: the paths before the swap-AB kernel (small-M to 16 tokens, prefill kernel above), for A/B
  // runs; read per launch, like the kernels' other A/B switches
  const char* off = std::getenv("DK_BF16_SWAPAB");
  const bool aligned = (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0;
  const int sms = T <= kSmallMEntryMaxTokens ? current_device_sms() : 0;
  switch (moe_bf16_path(T, M, E, N, K, sms, aligned, !(off && off[0] == '0'))) {
    case MoeBf16Path::kSwapAb:
      return sm90_bf16_grouped_gemm_swapab(X, W, Y, offsets, M, E, N, K, moe_bf16_swapab_hint(T, M, E), stream,
                                           fuse_silu, routing_ready_before_wait && T >= swapab_early_min_tokens());
    case MoeBf16Path::kSmallM:
      // Each token picks an expert at most once, so no expert has more than T rows: one pass.
      return sm90_bf16_grouped_gemm_masked(X, W, Y, ExpertRows{offsets, nullptr, 0}, E, N, K, T, M < E ? M : E, stream,
                                           fuse_silu, routing_ready_before_wait);
    case MoeBf16Path::kContiguous:
      return sm90_bf16_grouped_gemm_contiguous(X, W, Y, offsets, M, E, N, K, stream, fuse_silu);
  }
}

}  // namespace dispatch

namespace dispatch {

// Row r' of W' takes row src(r') of W: 16-row groups = 8 gate rows then the matching 8 up rows.
void interleave_gate_up(const void* src, void* dst, int E, int I, int K, int elem_bytes, cudaStream_t stream) {
  DK_CHECK(I % 8 == 0, "I must be a multiple of 8");
  const size_t row = size_t(K) * elem_bytes;
  for (int e = 0; e < E; ++e) {
    const char* s = static_cast<const char*>(src) + size_t(e) * 2 * I * row;
    char* d = static_cast<char*>(dst) + size_t(e) * 2 * I * row;
    // I/8 blocks of 8 rows each: gate blocks to rows 16b.., up blocks to rows 16b+8..
    DK_CUDA(cudaMemcpy2DAsync(d, 16 * row, s, 8 * row, 8 * row, I / 8, cudaMemcpyDefault, stream));
    DK_CUDA(cudaMemcpy2DAsync(d + 8 * row, 16 * row, s + size_t(I) * row, 8 * row, 8 * row, I / 8, cudaMemcpyDefault,
                              stream));
  }
}

}  // namespace dispatch
