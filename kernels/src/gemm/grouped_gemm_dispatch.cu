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
  // 1-2 tokens: the swap-AB kernel only when its work items (output tiles x experts that can have rows) give about
  // every SM one; with fewer, idle SMs cost more than the small-M kernel's fixed latency chain
  if (fits && (T > kSmallMEntryMaxTokens || int64_t(N / 128) * std::min(E, M) * 10 >= int64_t(sms) * 9))
    return MoeBf16Path::kSwapAb;
  return T <= kSmallMMaxTokens ? MoeBf16Path::kSmallM : MoeBf16Path::kContiguous;
}

int64_t swapab_items_tight(int token_tile, int M, int E, int N) {
  const int a = std::min(E, M);
  return int64_t(N / 128) * (a + (M - a) / token_tile);
}

int swapab_split_k(int64_t items, int k_blocks, int sms) {
  if (items <= 0 || sms <= 0) return 1;
  const auto share = [&](int split) {  // items of work per CTA, in whole items
    const int64_t clusters = sms / split;
    return double((items + clusters - 1) / clusters) / split;
  };
  int best = 1;
  for (int split : {2, 4})
    if (k_blocks >= 4 * split && share(split) * 5 <= share(1) * 4 && share(split) < share(best)) best = split;
  return best;
}

int swapab_split_for_launch(int64_t items, int k_blocks, int sms) {
  if (const char* env = std::getenv("DK_SWAPAB_SPLIT_K")) {  // read per launch, like the kernels' other A/B switches
    const int s = std::atoi(env);
    if ((s == 1 || s == 2 || s == 4) && k_blocks >= s) return s;
  }
  return swapab_split_k(items, k_blocks, sms);
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
                                           fuse_silu);
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
