// C ABI over the CUDA launchers, for test and benchmark harnesses that load the library with
// ctypes (the device machine has Python, not Bun). Each call returns 0, or -1 with the message
// kept for dk_last_error(). Pointers are device pointers; `stream` is a cudaStream_t (0 = default).
#include <string>
#include "../common/check.h"
#include "../gemm/grouped_gemm.h"
#include "../moe/moe_ops.h"
#include "../testing/pdl_producer.h"

namespace {
thread_local std::string g_error;

template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    g_error = e.what();
    return -1;
  }
}

dispatch::ExpertRows rows_of(const int* offsets, const int* counts, int cap) {
  return dispatch::ExpertRows{offsets, counts, cap};
}
}  // namespace

extern "C" {

const char* dk_last_error() { return g_error.c_str(); }

void dk_set_small_m_depth(int depth) { dispatch::g_small_m_depth = depth; }
void dk_set_pdl(int on) { dispatch::g_use_pdl = on != 0; }
void dk_set_small_m_rb(int rb) { dispatch::g_small_m_rb = rb; }
void dk_set_small_m_impl(int impl) { dispatch::g_small_m_impl = impl; }
void dk_set_small_m_pdl(int on) { dispatch::g_small_m_pdl = on != 0; }
void dk_set_small_m_pdl_mode(int mode) { dispatch::g_small_m_pdl_mode = mode; }
void dk_set_small_m_prefetch_mb(int mb) { dispatch::g_small_m_prefetch_mb = mb; }
void dk_set_contig_epilogue(int mode) { dispatch::g_contig_epilogue = mode; }
void dk_set_contig_half_tails(int mode) { dispatch::g_contig_half_tails = mode; }
void dk_set_contig_dynamic(int on) { dispatch::g_contig_dynamic = on != 0; }
void dk_set_contig_pingpong(int mode) { dispatch::g_contig_pingpong = mode; }
void dk_set_contig_pairs(int mode) { dispatch::g_contig_pairs = mode; }
void dk_set_contig_swap_tails(int mode) { dispatch::g_contig_swap_tails = mode; }

int dk_grouped_gemm_bf16_masked(const void* X, const void* W, void* Y, const int* offsets, const int* counts, int cap,
                                int E, int N, int K, int max_rows, int max_active, void* stream, int fuse_silu,
                                int routing_ready_before_wait) {
  return guarded([&] {
    dispatch::sm90_bf16_grouped_gemm_masked(X, W, Y, rows_of(offsets, counts, cap), E, N, K, max_rows, max_active,
                                            static_cast<cudaStream_t>(stream), fuse_silu != 0,
                                            routing_ready_before_wait != 0);
  });
}

int dk_grouped_gemm_w8a16_masked(const void* X, const void* W, const float* scales, void* Y, const int* offsets,
                                 const int* counts, int cap, int E, int N, int K, int max_rows, int max_active,
                                 void* stream, int fuse_silu, int routing_ready_before_wait) {
  return guarded([&] {
    dispatch::sm90_w8a16_grouped_gemm_masked(X, static_cast<const int8_t*>(W), scales, Y, rows_of(offsets, counts, cap),
                                             E, N, K, max_rows, max_active, static_cast<cudaStream_t>(stream),
                                             fuse_silu != 0, routing_ready_before_wait != 0);
  });
}

int dk_grouped_gemm_bf16_contiguous(const void* X, const void* W, void* Y, const int* offsets, int M, int E, int N,
                                    int K, void* stream, int fuse_silu) {
  return guarded([&] {
    dispatch::sm90_bf16_grouped_gemm_contiguous(X, W, Y, offsets, M, E, N, K, static_cast<cudaStream_t>(stream),
                                                fuse_silu != 0);
  });
}

int dk_grouped_gemm_w8a16_contiguous(const void* X, const void* W, const float* scales, void* Y, const int* offsets,
                                     int M, int E, int N, int K, int rows_hint, void* stream, int fuse_silu,
                                     int routing_ready) {
  return guarded([&] {
    dispatch::sm90_w8a16_grouped_gemm_contiguous(X, static_cast<const int8_t*>(W), scales, Y, offsets, M, E, N, K,
                                                 rows_hint, static_cast<cudaStream_t>(stream), fuse_silu != 0,
                                                 routing_ready != 0);
  });
}

int dk_w8a16_wgmma_token_tile(int rows_hint) { return dispatch::w8a16_wgmma_token_tile(rows_hint); }

int dk_grouped_gemm_bf16_swapab(const void* X, const void* W, void* Y, const int* offsets, int M, int E, int N, int K,
                                int rows_hint, void* stream, int fuse_silu) {
  return guarded([&] {
    dispatch::sm90_bf16_grouped_gemm_swapab(X, W, Y, offsets, M, E, N, K, rows_hint, static_cast<cudaStream_t>(stream),
                                            fuse_silu != 0);
  });
}

int dk_bf16_swapab_token_tile(int rows_hint) { return dispatch::bf16_swapab_token_tile(rows_hint); }

// The swap-AB kernels' split-K cluster size (1, 2, 4) for a launch: token tile, M rows, E experts, N outputs,
// k_blocks = K / 64 (bf16) or K / 128 (int8), on `sms` multiprocessors (swapab_split_k over swapab_items_tight).
int dk_swapab_split_k(int token_tile, int M, int E, int N, int k_blocks, int sms) {
  return dispatch::swapab_split_k(token_tile, dispatch::swapab_items_tight(token_tile, M, E, N), k_blocks, sms);
}

int dk_moe_grouped_gemm_bf16(const void* X, const void* W, void* Y, const int* offsets, int M, int T, int E, int N,
                             int K, void* stream, int fuse_silu, int routing_ready_before_wait) {
  return guarded([&] {
    dispatch::moe_grouped_gemm_bf16(X, W, Y, offsets, M, T, E, N, K, static_cast<cudaStream_t>(stream), fuse_silu != 0,
                                    routing_ready_before_wait != 0);
  });
}

// Test fixture (testing/pdl_producer.h): up to three copies after delay_ns, launched with PDL.
int dk_pdl_delayed_copy(const void* src0, void* dst0, size_t bytes0, const void* src1, void* dst1, size_t bytes1,
                        const void* src2, void* dst2, size_t bytes2, long long delay_ns, void* stream) {
  return guarded([&] {
    const void* src[3] = {src0, src1, src2};
    void* dst[3] = {dst0, dst1, dst2};
    const size_t bytes[3] = {bytes0, bytes1, bytes2};
    dispatch::pdl_delayed_copy(src, dst, bytes, delay_ns, static_cast<cudaStream_t>(stream));
  });
}

int dk_interleave_gate_up(const void* src, void* dst, int E, int I, int K, int elem_bytes, void* stream) {
  return guarded([&] { dispatch::interleave_gate_up(src, dst, E, I, K, elem_bytes, static_cast<cudaStream_t>(stream)); });
}

int dk_router_topk(const float* logits, const float* bias, int T, int E, int k, int scoring, int renormalize,
                   int num_groups, int topk_groups, float scale, int* ids, float* weights, void* stream) {
  return guarded([&] {
    dispatch::RouterConfig cfg;
    cfg.num_experts = E, cfg.top_k = k, cfg.scoring = static_cast<dispatch::Scoring>(scoring);
    cfg.renormalize = renormalize != 0, cfg.num_groups = num_groups, cfg.topk_groups = topk_groups, cfg.scale = scale;
    dispatch::sm90_f32_router_topk(logits, bias, T, cfg, ids, weights, static_cast<cudaStream_t>(stream));
  });
}

int dk_moe_align(const int* ids, int M, int E, int cap, int* counts, int* offsets, int* slot_row, void* stream) {
  return guarded([&] {
    dispatch::sm90_i32_moe_align(ids, M, E, cap, counts, offsets, slot_row, nullptr, static_cast<cudaStream_t>(stream));
  });
}

int dk_moe_permute(const void* X, const int* slot_row, int T, int k, int H, void* Xp, void* stream) {
  return guarded([&] { dispatch::sm90_bf16_moe_permute(X, slot_row, T, k, H, Xp, static_cast<cudaStream_t>(stream)); });
}

int dk_moe_unpermute(const void* Y, const int* slot_row, const float* weights, int T, int k, int H, void* out,
                     void* stream) {
  return guarded([&] {
    dispatch::sm90_bf16_moe_unpermute(Y, slot_row, weights, T, k, H, out, static_cast<cudaStream_t>(stream));
  });
}

int dk_silu_mul(const void* h, int rows, int I, void* act, void* stream) {
  return guarded([&] { dispatch::sm90_bf16_silu_mul(h, rows, I, act, static_cast<cudaStream_t>(stream)); });
}

int dk_quantize_int8_rows(const void* w, int rows, int K, void* q, float* scale, void* stream) {
  return guarded([&] {
    dispatch::sm90_bf16_quantize_int8_rows(w, rows, K, static_cast<int8_t*>(q), scale, static_cast<cudaStream_t>(stream));
  });
}

int dk_quantize_int8_streaming(const void* host_w, int E, int N, int K, void* q, float* scale, void* stream) {
  return guarded([&] {
    dispatch::quantize_int8_streaming(static_cast<const uint16_t*>(host_w), E, N, K, static_cast<int8_t*>(q), scale,
                                      static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
