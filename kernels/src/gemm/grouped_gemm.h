// Host entry points of the grouped GEMMs. All pointers are device pointers; all launches are
// asynchronous on `stream`; none reads routing data on the host, so all are graph-capturable.
//
// Legend: M routed rows, E experts, N output features, K input features.
//   X [M, K] bf16 (rows grouped by expert, see ExpertRows), W [E, N, K] bf16 or int8,
//   scales [E, N] fp32 (int8 only), Y [M, N] bf16.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
#include "../common/rows.h"
#include "../moe/moe_ops.h"

namespace dispatch {

// Bandwidth-bound path for few rows per expert (decode; masked or contiguous rows).
//   max_rows_per_expert: rows per expert the tile should cover in one pass (a hint: an expert with
//     more rows is done in several passes, correct but re-reading its weights); cap or T is exact.
//   max_active: an upper bound on experts with rows (min(E, M) is always safe); sets the grid.
//   fuse_silu: Y = silu(gate) * up [M, N/2] instead of [M, N]; W must hold gate and up rows
//     interleaved by 8 (see sm90_bf16_interleave_gate_up). Same flag on every GEMM below.
//   routing_ready_before_wait: only with g_small_m_pdl_mode = 1 (else ignored). true when `rows` was
//     written at least two kernels back and the kernel in between triggers its dependents only after its
//     own griddepcontrol.wait (this GEMM does), and W is not written by the previous kernel: the kernel then
//     finds its expert and loads its first weights before it waits, and waits before reading X. The MoE
//     layer: gate|up right after the routing kernel passes false, down passes true
//     (grouped_gemm_small_m.cuh states the rule).
void sm90_bf16_grouped_gemm_masked(const void* X, const void* W, void* Y, ExpertRows rows, int E, int N,
                                   int K, int max_rows_per_expert, int max_active, cudaStream_t stream,
                                   bool fuse_silu = false, bool routing_ready_before_wait = false);

// Small-M schedule: 0 = stream (fixed grid of 2 CTAs per SM, equal share of the active experts'
// 16-row blocks per CTA), 1 = legacy (one expert per grid row; the knobs below apply to it; default),
// 2 = pair (legacy grid, two 16-row blocks per warp item; the knobs below apply to it too),
// 3 = auto (legacy, pair where measured faster).
extern int g_small_m_impl;
// Programmatic Dependent Launch for the stream schedule (default off: unmeasured).
extern bool g_small_m_pdl;
// Programmatic Dependent Launch for the legacy small-M kernel: 0 = off (default), 1 = on, honoring each
// launch's routing_ready_before_wait, 2 = on, always waiting before the routing scan (A/B). The pair and
// stream schedules keep their own launches.
extern int g_small_m_pdl_mode;
// Pair schedule: L2 prefetch of the first bytes of each CTA's weight rows right after the routing
// scan, at most this many MiB per launch (whole rows when the launch's weights fit; default 40, 0 = off).
extern int g_small_m_prefetch_mb;
// Benchmark knob: chunks in flight per warp in the legacy small-M kernel (0 = default policy, 2 or 4).
extern int g_small_m_depth;
// Benchmark knob: row blocks per CTA in the legacy small-M kernel (0 = about one wave of CTAs).
extern int g_small_m_rb;
// Programmatic Dependent Launch for the wgmma kernel (default on; see common/launch.h).
extern bool g_use_pdl;
// Epilogue of the prefill (wgmma) kernel: 0 = direct 4-byte stores from the registers, 1 = staged
// through shared memory, 16-byte row stores (the default; same output bits; falls back to 0 when Y is
// not 16-byte aligned); 2 = benchmark only, nothing written; 3 = staged through stmatrix with TMA stores, 4 = staged
// through stmatrix (opt-in, the same bits as 1, measured equal to it in session 21). DK_CONTIG_EPILOGUE=0 / 1 / 3 / 4
// overrides it per launch.
extern int g_contig_epilogue;
// Prefill (wgmma) kernel: an expert's last row tile of at most 64 rows runs as a 64-row tile (1) or as a whole
// 128-row one (0); 2 (the default) = 1 except for large weight tiles on few rows per expert (the .cu says why);
// DK_CONTIG_HALF_TAILS=0 / 1 overrides it per launch.
extern int g_contig_half_tails;
// Prefill (wgmma) kernel: tiles from an atomic counter (1, the default) or the static blockIdx.x stride (0);
// DK_CONTIG_DYNAMIC=0 also turns it off, per launch.
extern int g_contig_dynamic;
// Prefill (wgmma) kernel: the ping-pong schedule (1), the cooperative kernel (0) or auto (2, the default: ping-pong
// where K <= 1536; the .cu says why); DK_CONTIG_PINGPONG=0 / 1 overrides it per launch.
extern int g_contig_pingpong;
// Prefill (wgmma) kernel: the ping-pong kernel in 2-CTA clusters sharing each token tile (1), single CTAs (0) or auto
// (2, the default: off, the rule in contig_plan.h says why); only where the ping-pong kernel runs and N is a multiple
// of 256, with either schedule. DK_CONTIG_PAIRS=0 / 1 overrides it per launch.
extern int g_contig_pairs;
// Prefill (wgmma) kernel: the cooperative kernel runs an expert's tail of <= 32 rows swapped (the weights as the MMA's
// M side, the tail's tokens as its N) inside the expert's last whole tile (1), as 64- or 128-row tiles (0), or auto
// (2, the default; the rule in contig_plan.h); only where the cooperative kernel runs with the staged epilogue and
// E <= 384. DK_CONTIG_SWAP_TAILS=0 / 1 overrides it per launch.
extern int g_contig_swap_tails;

// W8A16: int8 weights with per-output-channel fp32 scales, dequantized in registers.
void sm90_w8a16_grouped_gemm_masked(const void* X, const int8_t* W, const float* scales, void* Y,
                                    ExpertRows rows, int E, int N, int K, int max_rows_per_expert,
                                    int max_active, cudaStream_t stream, bool fuse_silu = false,
                                    bool routing_ready_before_wait = false);

// W8A16 on tensor cores (TMA ring of int8 weight tiles, converted to bf16 in registers, wgmma with the
// weights as A and the tokens as B), contiguous rows as below; for any number of rows per expert
// (decode batches and prefill). N and K multiples of 128. rows_hint: rows per expert one token tile
// should cover (8, 16, 32, 64 or 128 after rounding up; an expert with more rows takes several tiles,
// which share each weight tile through L2). Graph-safe: the host never reads the routing.
// routing_ready (as routing_ready_before_wait above, but with any PDL mode): the offsets were written two or more
// kernels back, so each CTA's first ring of weight tiles goes out before its griddepcontrol.wait
// (swapab_producer.cuh); DK_SWAPAB_EARLY_WEIGHTS=0 turns that off per launch (A/B).
void sm90_w8a16_grouped_gemm_contiguous(const void* X, const int8_t* W, const float* scales, void* Y,
                                        const int* offsets, int M, int E, int N, int K, int rows_hint,
                                        cudaStream_t stream, bool fuse_silu = false, bool routing_ready = false);
// The token tile sm90_w8a16_grouped_gemm_contiguous takes for a rows-per-expert hint, and the CTAs per SM it runs
// with that tile (1 or 2; DK_W8A16_CTAS_PER_SM overrides it per launch).
int w8a16_wgmma_token_tile(int rows_hint);
int w8a16_wgmma_ctas_per_sm(int token_tile, int M, int E, int N, int sms);

// bf16 swap-AB on tensor cores for decode-sized batches (TMA ring of weight tiles as wgmma's A, the tokens as
// its N side, both from shared memory), contiguous rows as below. N a multiple of 128, K of 64. rows_hint: rows
// per expert one token tile should cover (8, 16, 32 or 64 after rounding up; an expert with more rows
// takes several tiles, which share each weight tile through L2). Graph-safe: the host never reads the routing.
// routing_ready: as the W8A16 kernel's.
void sm90_bf16_grouped_gemm_swapab(const void* X, const void* W, void* Y, const int* offsets, int M, int E, int N,
                                   int K, int rows_hint, cudaStream_t stream, bool fuse_silu = false,
                                   bool routing_ready = false);
// DK_SWAPAB_EARLY_WEIGHTS=0 (read per launch): the swap-AB kernels ignore routing_ready and wait first.
bool early_weights_off();
// The fewest tokens a step must have for the bf16 entry's routing_ready swap-AB launches to take the early weight
// loads (native-cuda's int8 path, whose gate|up is the W8A16 kernel too, takes them at every T). H200, 2026-12-02
// (docs/kernels.md, session 10), Qwen3-30B-A3B decode steps, early vs DK_SWAPAB_EARLY_WEIGHTS=0: bf16 batch 4 5.98 vs
// 6.06-6.12 ms, batch 64 18.57 vs 18.67-18.73; int8 batch 4 / 16 / 64 4.98 / 8.73 / 12.58 vs 5.23 / 9.00 / 12.92; at
// one bf16 token (gate|up is the small-M kernel there) no gain: 3.292 / 3.246 vs 3.168 / 3.194 in one call,
// 3.153 / 3.230 vs 3.232 / 3.258 in another.
constexpr int kSwapAbEarlyMinTokens = 2;
// kSwapAbEarlyMinTokens, or DK_SWAPAB_EARLY_MIN_TOKENS (read per call, A/B; the bf16 entry only).
int swapab_early_min_tokens();
// Its token tile for a rows-per-expert hint.
int bf16_swapab_token_tile(int rows_hint);

// Split K across thread-block clusters in both swap-AB kernels (cluster_split_k.cuh), for launches with fewer work
// items than SMs. swapab_items_tight: an upper bound on the items (128 output rows x one token tile of one expert)
// from M and E alone: at most min(E, M) experts have rows, each one partial token tile, the other rows whole tiles.
// swapab_split_k: the cluster size for `items` items of k_blocks k blocks each on `sms` multiprocessors: 2 where the
// token tile is at most kSwapAbMaxSplitTile, every pair of SMs gets at most one item and each rank >= 4 k blocks, else
// 1 (clusters of 4 and clusters taking several items in turn measured slower: grouped_gemm_dispatch.cu). The
// launchers also fall back to 1 when fewer clusters fit on the device than there are items.
// DK_SWAPAB_SPLIT_K=1|2|4 forces it per launch at tiles <= kSwapAbMaxSplitTile (A/B runs and tests; ignored where a
// rank would get no k block).
int64_t swapab_items_tight(int token_tile, int M, int E, int N);
int swapab_split_k(int token_tile, int64_t items, int k_blocks, int sms);
// the rule, or DK_SWAPAB_SPLIT_K (*forced = true: the launchers then split even where clusters take several items)
int swapab_split_for_launch(int token_tile, int64_t items, int k_blocks, int sms, bool* forced);
constexpr int kSwapAbMaxSplitTile = 16;

// Prefill path: TMA + wgmma, warp-specialized, persistent. Rows of expert e are
// [offsets[e], offsets[e+1]) of X (no alignment needed); Y rows outside every group are untouched.
void sm90_bf16_grouped_gemm_contiguous(const void* X, const void* W, void* Y, const int* offsets, int M,
                                       int E, int N, int K, cudaStream_t stream, bool fuse_silu = false);

// Loader helper for fuse_silu: W [E, 2I, K] with gate rows [0, I) and up rows [I, 2I) ->
// W' [E, 2I, K] with blocks of 8 gate rows and 8 up rows alternating. bf16 or int8 rows
// (elem_bytes 2 or 1); for int8 also permute the scales (elem_bytes 4, K = 1).
void interleave_gate_up(const void* src, void* dst, int E, int I, int K, int elem_bytes, cudaStream_t stream);

// The MoE layer's entry: picks the path from T (tokens in the batch) and the shape alone, so a CUDA graph
// captured for one batch size always replays one path. Measured on the H200 (docs/kernels.md, session 8):
// at T <= kSmallMEntryMaxTokens the small-M kernel unless the swap-AB kernel's work items ((N / 128) x
// min(E, M)) reach 0.9 x the SMs (H200, 05:49 UTC interleaved run, T = 1: mean share of HBM 76.9% vs 73.6%, rows
// >= 85% 5 vs 2 of 20; Qwen3-30B-A3B gate_up at 96 items keeps small-M), the swap-AB kernel up to kSwapAbMaxTokens while the
// rows-per-expert hint (twice the mean plus 8, as native-cuda's int8 path) is <= kSwapAbMaxHint (at T = 256:
// 82-99% of HBM with 64-token tiles vs 74-89% on every shape but Mixtral, whose hint of 136 keeps the prefill
// kernel: 66-93% there vs 75-84%), the prefill (wgmma) kernel above. Shapes the
// swap-AB kernel refuses (N % 128, K % 64) keep the small-M kernel to kSmallMMaxTokens, as does every shape
// under DK_BF16_SWAPAB=0 (the paths before session 8, for A/B runs).
// Rows of expert e are [offsets[e], offsets[e+1]) of X [M, K] (M = T * top_k). routing_ready_before_wait:
// passed to the small-M path (see sm90_bf16_grouped_gemm_masked) and the swap-AB path (its routing_ready: the
// first ring of weight tiles before the wait, whatever the small-M PDL mode); the prefill path ignores it.
void moe_grouped_gemm_bf16(const void* X, const void* W, void* Y, const int* offsets, int M, int T, int E, int N,
                           int K, cudaStream_t stream, bool fuse_silu = false, bool routing_ready_before_wait = false);
constexpr int kSmallMMaxTokens = 16;
constexpr int kSmallMEntryMaxTokens = 2;

// A one-token MoE step whose gate|up GEMM routes itself (moe_gate_up_self_routed): no routing kernel between
// the router logits and the experts. The GEMM reads `logits` [E] (the step's one token) and writes the routing
// the later kernels read: ids and weights [k] (router_topk's values), slot_row [k] (choice j's row: its rank by
// expert id), counts [E] and offsets [E + 1] (the contiguous layout of k rows).
struct SelfRoute {
  const float* logits;
  const float* bias;  // [E] or null: added for selection only
  RouterConfig cfg;
  int32_t* ids;
  float* weights;
  int32_t* slot_row;
  int32_t* counts;
  int32_t* offsets;
};
// Whether moe_gate_up_self_routed takes this shape: N % 16, K % 64, E <= 512, top_k <= 32, and the bf16 entry
// (moe_grouped_gemm_bf16) would run the small-M kernel for it at one token on this device.
bool moe_gate_up_self_routed_supported(int E, int N, int K, const RouterConfig& cfg);
// Y [k, N] (fuse_silu: [k, N / 2]) = the token's row X [1, K] through each chosen expert's W [E, N, K], row j = the
// choice of rank j by expert id; the small-M kernel's schedule and launch (no PDL; it waits for the logits
// first and triggers after, both no-ops then). The down GEMM that follows reads `offsets` after its own wait.
void moe_gate_up_self_routed(const void* X, const void* W, void* Y, const SelfRoute& route, int E, int N, int K,
                             cudaStream_t stream, bool fuse_silu);
constexpr int kSwapAbMaxTokens = 256;
constexpr int kSwapAbMaxHint = 96;

// The path moe_grouped_gemm_bf16 takes, as a pure host function (no CUDA call; the addon exposes it to tests):
// sms = the device's multiprocessors (read only at T <= kSmallMEntryMaxTokens), aligned16 = X and W 16-byte
// aligned, swapab_enabled = not DK_BF16_SWAPAB=0. With kSwapAb the kernel gets moe_bf16_swapab_hint's rows hint.
enum class MoeBf16Path { kSmallM, kSwapAb, kContiguous };
MoeBf16Path moe_bf16_path(int T, int M, int E, int N, int K, int sms, bool aligned16, bool swapab_enabled);
int moe_bf16_swapab_hint(int T, int M, int E);

}  // namespace dispatch
