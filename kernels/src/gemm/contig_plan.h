// Which prefill grouped GEMM (and epilogue) a launch of moe's contiguous path runs, as a pure function of its shape and
// the switches (sm90_bf16_grouped_gemm_contiguous.cu reads the switches and launches; test/contig_plan_test.cpp checks
// the rules on the CPU). Measured on the H200 on 2026-12-02 (docs/kernels.md "Session 17").
#pragma once
#include <cstdint>

namespace dispatch {

// Switch modes: 0 off, 1 on, 2 auto (the rule below).
struct ContigPlanInputs {
  int M = 0, E = 0, K = 0;  // rows, experts, the GEMM's K
  int N = 0;                // the GEMM's N (0: unknown, no pairs)
  int half_tails = 2;       // g_contig_half_tails / DK_CONTIG_HALF_TAILS
  int pingpong = 2;         // g_contig_pingpong / DK_CONTIG_PINGPONG
  bool dynamic = true;      // g_contig_dynamic / DK_CONTIG_DYNAMIC
  int pairs = 0;            // g_contig_pairs / DK_CONTIG_PAIRS (0 off, 1 on, 2 auto)
  int swap_tails = 0;       // g_contig_swap_tails / DK_CONTIG_SWAP_TAILS (0 off, 1 on, 2 auto)
  // g_contig_epilogue / DK_CONTIG_EPILOGUE: 0 direct, 1 staged, 2 none (the benchmark's knob: nothing written),
  // 3 staged through stmatrix with TMA stores, 4 staged through stmatrix
  int epilogue = 1;
  bool aligned = true;  // Y 16-byte aligned (the staged epilogues' 16-byte pieces and TMA boxes need it; else direct)
};

struct ContigPlan {
  bool pingpong = false;    // sm90_bf16_grouped_gemm_contiguous_pingpong.cuh (128 x 128 tiles per warpgroup)
  bool half_tails = false;  // an expert's last tile of <= 64 rows as a 64-row tile (either kernel)
  bool dynamic = false;     // tiles from an atomic counter (either kernel)
  bool pairs = false;       // the ping-pong kernel in 2-CTA clusters sharing the token tile
  bool staged = false;      // the staged epilogue (shared memory; the ping-pong kernel's only one), else direct
  bool write = true;        // false: the cooperative kernel writes nothing (epilogue 2, benchmark only)
  bool stmatrix = false;    // the staging goes through stmatrix
  bool tma_stores = false;  // the chunks whose rows are all the expert's leave through TMA stores
  bool swap_tails = false;  // the cooperative kernel with swapped tails (tails of <= 32 rows as the MMA's N side)
};

// Swapped tails: the cooperative kernel's variant with a 32-row tail box per stage (staged epilogue or none) and a
// 384-expert prefix (sm90_bf16_grouped_gemm_contiguous.cuh, ContigSwapTile).
constexpr int kSwapTailsMaxExperts = 384;
// Swapped tails (auto) where the experts average fewer than 512 rows (up to three whole tiles each). On the H200
// (session 22; docs/kernels.md "Session 22") a tail costs 0.06-0.15 of a whole tile (0.40-0.70 as a half tile) where
// it joins an expert's only whole tile, but 0.25-0.48 (0.43-0.71) where the expert has two or more
// (bench/kernels/tail_probe.py); over the prefill rows the rule takes, 1.00x the kernel without them (median of 18 rows
// at 2,048-4,096 tokens, 0.99-1.16x: DeepSeek-V3 at 4,096 tokens 1.09-1.16x, Qwen3-30B-A3B gate_up at 2,048 1.11x,
// uniform routing) and 1.01x at 512-1,024 tokens (28 rows, 0.88-1.36x). Forced on at 512 rows per expert and more,
// DeepSeek-V3 at 16,384 tokens lost up to 3% (Mixtral's 512-1,024 rows gained 2-5%, left out with it).
inline bool swap_tails_auto(int M, int E, int /*K*/) { return int64_t(M) < int64_t(512) * E; }

// DK_CONTIG_EPILOGUE's epilogue: "0", "1", "3" or "4"; -1 for anything else, unset included (2, the benchmark's
// write-nothing knob, is not taken from the environment: a model would compute with whatever Y held).
inline int epilogue_from_env(const char* v) {
  const bool ok = v != nullptr && (v[0] == '0' || v[0] == '1' || v[0] == '3' || v[0] == '4') && v[1] == '\0';
  return ok ? v[0] - '0' : -1;
}

// Pairs (auto): off. On the H200 (session 19, 60 rows at 2,048-16,384 tokens) they ran 0.97x the single-CTA ping-pong
// (median): 0.86-0.94x at K <= 1,408, where the ping-pong is the default, and 1.00-1.18x at long K, where the
// cooperative kernel is faster than either; faster than the default on 2 rows of 60, by 3%.
constexpr bool kPairsAuto = false;

// Ping-pong (auto) where K <= 1536: a short K leaves few k-blocks per tile, so the epilogue it hides under the other
// warpgroup's MMAs is a large share of a tile; with a long K the share is small and its 128-wide weight tiles (a third
// more L2 -> shared-memory traffic per MMA than 256-wide ones) cost more (the down projections of OLMoE, Qwen3-30B-A3B
// and deepseek-moe-16b at K = 768-1408: 1.00-1.10x the cooperative kernel; K = 2048 0.92-1.03x; Mixtral to 0.69x).
constexpr int kPingPongMaxK = 1536;

// Half tails (auto) except where a weight tile is large (K > 4096: 256 x K bf16 over 2 MiB) and the experts average
// fewer than 256 rows, a GEMM that reads weights about as fast as HBM gives them: there a half tile runs through K
// twice as fast as the whole tile beside it on the same weight tile, which then finds the rest of that weight tile
// evicted from L2 (DeepSeek-V3 gate_up at 4,096 tokens lost 8% with half tails; every other row 0.98-1.15x).
inline bool half_tails_auto(int M, int E, int K) { return K <= 4096 || int64_t(M) >= int64_t(256) * E; }

inline ContigPlan plan_contiguous(const ContigPlanInputs& in) {
  ContigPlan p;
  const int epi = in.epilogue;
  p.write = epi != 2;
  p.staged = (epi == 1 || epi == 3 || epi == 4) && in.aligned;
  p.stmatrix = p.staged && (epi == 3 || epi == 4);
  p.tma_stores = p.staged && epi == 3;
  p.pingpong = p.staged && (in.pingpong == 2 ? in.K <= kPingPongMaxK : in.pingpong != 0);
  p.swap_tails = !p.pingpong && (p.staged || !p.write) && in.E <= kSwapTailsMaxExperts &&
                 (in.swap_tails == 2 ? swap_tails_auto(in.M, in.E, in.K) : in.swap_tails != 0);
  p.half_tails = in.half_tails == 2 ? half_tails_auto(in.M, in.E, in.K) : in.half_tails != 0;
  p.dynamic = in.dynamic;
  // pairs: the ping-pong kernel only, N in whole 256-wide units
  p.pairs = p.pingpong && in.N > 0 && in.N % 256 == 0 &&
            (in.pairs == 2 ? kPairsAuto : in.pairs != 0);
  return p;
}

}  // namespace dispatch
