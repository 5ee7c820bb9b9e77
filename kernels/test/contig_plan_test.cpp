// The prefill grouped GEMM's plan (src/gemm/contig_plan.h) on the CPU: which kernel and which tile options each
// launch shape and switch setting gets. Built and run by contig-plan.test.ts:
//
//   g++ -std=c++17 -Isrc test/contig_plan_test.cpp -o /tmp/contig_plan_test
//
// Exit status 0 when every case holds; each failure is printed.
#include <cstdio>
#include <string>
#include "gemm/contig_plan.h"

using namespace dispatch;

namespace {

int failures = 0, cases = 0;

void expect(const std::string& what, bool ok) {
  ++cases;
  if (ok) return;
  ++failures;
  std::printf("FAIL %s\n", what.c_str());
}

// staged: the staged epilogue (1) or direct (0)
ContigPlan plan(int M, int E, int K, int half = 2, int pp = 2, bool dynamic = true, bool staged = true, int N = 0,
                int pairs = 2) {
  ContigPlanInputs in;
  in.M = M, in.E = E, in.K = K, in.half_tails = half, in.pingpong = pp, in.dynamic = dynamic;
  in.epilogue = staged ? 1 : 0;
  in.N = N, in.pairs = pairs;
  return plan_contiguous(in);
}

ContigPlan plan_swap(int swap, int K, int E = 128, int epilogue = 1, int pp = 2) {
  ContigPlanInputs in;
  in.M = 32768, in.E = E, in.K = K, in.swap_tails = swap, in.epilogue = epilogue, in.pingpong = pp;
  return plan_contiguous(in);
}

ContigPlan plan_epilogue(int epilogue, bool aligned, int K) {
  ContigPlanInputs in;
  in.M = 32768, in.E = 128, in.K = K, in.epilogue = epilogue, in.aligned = aligned;
  return plan_contiguous(in);
}

}  // namespace

int main() {
  // Qwen3-30B-A3B at 4,096 tokens (M = 32,768 rows, 128 experts): down (K = 768) ping-pong, gate_up (K = 2048) the
  // cooperative kernel with half tails and the dynamic schedule
  ContigPlan p = plan(32768, 128, 768);
  expect("qwen3 down: ping-pong, half tails, dynamic", p.pingpong && p.half_tails && p.dynamic);
  p = plan(32768, 128, 2048);
  expect("qwen3 gate_up: cooperative, half tails, dynamic", !p.pingpong && p.half_tails && p.dynamic);
  // the K bound itself
  expect("K = 1536: ping-pong", plan(32768, 128, 1536).pingpong);
  expect("K = 1600: cooperative", !plan(32768, 128, 1600).pingpong);
  // DeepSeek-V3 gate_up (K = 7168, 256 experts): 4,096 tokens average 128 rows per expert (no half tails), 16,384
  // tokens 512 (half tails); K = 4096 keeps them at any row count
  expect("dsv3 gate_up 4,096 tokens: no half tails", !plan(32768, 256, 7168).half_tails);
  expect("dsv3 gate_up 16,384 tokens: half tails", plan(131072, 256, 7168).half_tails);
  expect("256 rows per expert at K = 7168: half tails", plan(65536, 256, 7168).half_tails);
  expect("K = 4096, few rows: half tails", plan(1024, 8, 4096).half_tails);
  // switches forced on and off
  expect("half tails forced off", !plan(32768, 128, 2048, 0).half_tails);
  expect("half tails forced on", plan(32768, 256, 7168, 1).half_tails);
  expect("ping-pong forced off: cooperative", !plan(32768, 128, 768, 2, 0).pingpong);
  expect("ping-pong forced off: half tails by the rule", plan(32768, 128, 768, 2, 0).half_tails);
  expect("ping-pong forced on at a long K", plan(32768, 8, 14336, 2, 1).pingpong);
  expect("ping-pong, half tails off, static: session 17's ping-pong",
         [] { const ContigPlan q = plan(32768, 128, 768, 0, 2, false); return q.pingpong && !q.half_tails && !q.dynamic; }());
  expect("static schedule", !plan(32768, 128, 2048, 2, 2, false).dynamic);
  // the ping-pong kernel has only the staged epilogue: direct (or an unaligned output) keeps the cooperative kernel
  expect("direct epilogue: no ping-pong", !plan(32768, 128, 768, 2, 1, true, false).pingpong);
  expect("direct epilogue: the cooperative kernel's options", plan(32768, 128, 768, 2, 1, true, false).dynamic);
  // pairs (2-CTA clusters of the ping-pong kernel): forced on, only where the ping-pong kernel runs and N is a multiple
  // of 256, with either schedule; auto leaves them off (measured slower, contig_plan.h)
  {
    const ContigPlan q = plan(32768, 128, 768, 2, 2, true, true, 2048, 1);
    expect("pairs on: ping-pong in pairs, dynamic schedule", q.pingpong && q.pairs && q.dynamic && q.half_tails);
    expect("pairs on, static schedule", plan(32768, 128, 768, 2, 2, false, true, 2048, 1).pairs &&
                                            !plan(32768, 128, 768, 2, 2, false, true, 2048, 1).dynamic);
  }
  expect("pairs on, N = 1408 (not whole 256-wide units): single CTAs",
         [] { const ContigPlan q = plan(32768, 64, 2048, 2, 1, true, true, 1408, 1); return q.pingpong && !q.pairs && q.dynamic; }());
  expect("pairs on, cooperative kernel: no pairs", !plan(32768, 128, 2048, 2, 0, true, true, 1536, 1).pairs);
  expect("pairs on, N unknown: no pairs", !plan(32768, 128, 768, 2, 2, true, true, 0, 1).pairs);
  expect("pairs auto: off", !plan(32768, 128, 768, 2, 2, true, true, 2048, 2).pairs);
  // the epilogue: staged by default; stmatrix staging for 3 and 4, TMA stores for 3; an unaligned Y takes direct
  // (and with it the cooperative kernel); 2 writes nothing, on the cooperative kernel
  {
    const ContigPlan d = plan_epilogue(1, true, 768);
    expect("staged: ping-pong at K = 768, plain stores",
           d.staged && d.write && !d.stmatrix && !d.tma_stores && d.pingpong);
    const ContigPlan t = plan_epilogue(3, true, 768);
    expect("tma: staged through stmatrix with TMA stores, ping-pong",
           t.staged && t.stmatrix && t.tma_stores && t.pingpong);
    const ContigPlan m = plan_epilogue(4, true, 2048);
    expect("stmatrix: staged through stmatrix, no TMA stores", m.staged && m.stmatrix && !m.tma_stores && !m.pingpong);
    const ContigPlan u = plan_epilogue(3, false, 768);
    expect("tma, unaligned Y: direct, cooperative",
           !u.staged && !u.stmatrix && !u.tma_stores && !u.pingpong && u.write);
    const ContigPlan x = plan_epilogue(0, true, 768);
    expect("direct: no staging, cooperative", !x.staged && !x.stmatrix && !x.pingpong && x.write);
    const ContigPlan n = plan_epilogue(2, true, 768);
    expect("none: nothing written, cooperative", !n.write && !n.pingpong && !n.tma_stores);
  }
  // swapped tails: the cooperative kernel with the staged epilogue (or none, the benchmark's knob), E <= 384
  expect("swap tails on: cooperative at K = 2048", plan_swap(1, 2048).swap_tails && !plan_swap(1, 2048).pingpong);
  expect("swap tails on, ping-pong at K = 768: not there", !plan_swap(1, 768).swap_tails);
  expect("swap tails on, ping-pong forced off at K = 768", plan_swap(1, 768, 128, 1, 0).swap_tails);
  expect("swap tails on, 384 experts", plan_swap(1, 2048, 384).swap_tails);
  expect("swap tails on, 385 experts: off (the prefix holds 384)", !plan_swap(1, 2048, 385).swap_tails);
  expect("swap tails on, direct epilogue: off", !plan_swap(1, 2048, 128, 0).swap_tails);
  expect("swap tails on, stmatrix staging", plan_swap(1, 2048, 128, 4).swap_tails);
  expect("swap tails on, nothing written (benchmark)", plan_swap(1, 2048, 128, 2).swap_tails);
  expect("swap tails off", !plan_swap(0, 2048).swap_tails);
  expect("swap tails default input: off", !plan(32768, 128, 2048).swap_tails);
  // auto: where the experts average fewer than 512 rows, on the cooperative kernel
  expect("swap tails auto: qwen3 gate_up 4,096 tokens (256 rows per expert)", plan_swap(2, 2048).swap_tails);
  {
    ContigPlanInputs in;
    in.E = 256, in.K = 7168, in.swap_tails = 2;
    in.M = 32768;
    expect("swap tails auto: dsv3 gate_up 4,096 tokens", plan_contiguous(in).swap_tails);
    in.M = 131072;
    expect("swap tails auto: dsv3 gate_up 16,384 tokens (512 rows per expert): off", !plan_contiguous(in).swap_tails);
    in.M = 131071;
    expect("swap tails auto: just under 512 rows per expert", plan_contiguous(in).swap_tails);
  }
  expect("swap tails auto, ping-pong shape (qwen3 down): off", !plan_swap(2, 768).swap_tails);
  // DK_CONTIG_EPILOGUE: one digit of 0, 1, 3, 4; the write-nothing knob and anything else are not taken
  expect("env 3", epilogue_from_env("3") == 3);
  expect("env 0", epilogue_from_env("0") == 0);
  expect("env 4", epilogue_from_env("4") == 4);
  expect("env 2 refused", epilogue_from_env("2") == -1);
  expect("env unset", epilogue_from_env(nullptr) == -1);
  expect("env empty", epilogue_from_env("") == -1);
  expect("env 31 refused", epilogue_from_env("31") == -1);
  expect("env tma refused", epilogue_from_env("tma") == -1);
  if (failures == 0) std::printf("all %d checks pass\n", cases);
  return failures == 0 ? 0 : 1;
}
