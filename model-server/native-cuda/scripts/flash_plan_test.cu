// The prefill attention's tile plan (src/flash_plan.cu) on the CPU: which kernel and rows each step shape gets, and
// the tiles themselves. Built and run by scripts/flash-plan.test.ts (nvcc, no GPU needed):
//
//   nvcc -std=c++17 -Isrc -I../../kernels/src scripts/flash_plan_test.cu src/flash_plan.cu -o /tmp/flash_plan_test
//
// Exit status 0 when every case holds; each failure is printed.
#include <cstdio>
#include <string>
#include <vector>
#include "flash_plan.h"

using namespace dcuda;

namespace {

int failures = 0, cases = 0;

void expect_eq(const std::string& what, long got, long want) {
  ++cases;
  if (got == want) return;
  ++failures;
  std::printf("FAIL %s: got %ld, want %ld\n", what.c_str(), got, want);
}

// A step of sequences given as (first position, rows): tok_seq and pos as the model packs them.
struct Step {
  std::vector<int32_t> tok_seq, pos;
  explicit Step(const std::vector<std::pair<int, int>>& seqs) {
    for (size_t s = 0; s < seqs.size(); ++s)
      for (int i = 0; i < seqs[s].second; ++i) tok_seq.push_back(int32_t(s)), pos.push_back(seqs[s].first + i);
  }
  FlashPlan plan(int Hq, int window = 0, FlashKernel want = FlashKernel::kAuto, int mma_rows = 0,
                 std::vector<int32_t>* tiles = nullptr, int persistent = -1) const {
    FlashPlanInputs in;
    in.tok_seq = tok_seq.data(), in.pos = pos.data(), in.T = int(tok_seq.size()), in.Hq = Hq, in.window = window;
    in.sms = 132, in.want = want, in.mma_rows = mma_rows, in.persistent = persistent;
    std::vector<int32_t> scratch(2 * tok_seq.size());
    return plan_flash(in, tiles ? (tiles->assign(2 * tok_seq.size(), -1), tiles->data()) : scratch.data());
  }
};

void expect_plan(const std::string& name, const FlashPlan& p, FlashKernel kernel, int rows, int num_tiles) {
  expect_eq(name + ": kernel", int(p.kernel), int(kernel));
  expect_eq(name + ": rows", p.rows, rows);
  expect_eq(name + ": tiles", p.num_tiles, num_tiles);
}

}  // namespace

int main() {
  const auto mma = FlashKernel::kMma, wgmma = FlashKernel::kWgmma;
  std::vector<std::pair<int, int>> sixteen(16, {0, 512});
  // 64 tiles x 32 heads fill the SMs, but each tile sees 1-4 key tiles (mean 2.5): mma.sync at 128 rows (>= 2 x SMs)
  expect_plan("16 x 512", Step(sixteen).plan(32), mma, 128, 64);
  // one 8,192-token prompt: 64 tiles of 1..64 key tiles (mean 32.5): wgmma
  expect_plan("1 x 8192", Step({{0, 8192}}).plan(32), wgmma, 128, 64);
  // two 2,048-token prompts: mean 8.5 key tiles: wgmma
  expect_plan("2 x 2048", Step({{0, 2048}, {0, 2048}}).plan(32), wgmma, 128, 32);
  // four 1,024-token prompts: 32 tiles x 32 heads, mean 4.5 key tiles: wgmma (the threshold is 4)
  expect_plan("4 x 1024", Step({{0, 1024}, {0, 1024}, {0, 1024}, {0, 1024}}).plan(32), wgmma, 128, 32);
  // 768 tokens: tiles see 1..6 key tiles (mean 3.5): mma.sync; 6 x 32 = 192 CTAs < 2 x 132: 64-row tiles
  expect_plan("1 x 768", Step({{0, 768}}).plan(32), mma, 64, 12);
  // a 100-token chunk after a 5,000-token cached prefix: 40 key tiles, but one tile x 32 heads < SMs
  expect_plan("prefix 5000 + 100", Step({{5000, 100}}).plan(32), mma, 64, 2);
  // the same chunk with 256 query heads: its one 128-row tile gives 256 CTAs, which fill the SMs: wgmma
  expect_plan("prefix 5000 + 100, 256 heads", Step({{5000, 100}}).plan(256), wgmma, 128, 1);
  // a 4,096-token prompt under a 256-token window: each tile sees (127 + 255) / 128 + 1 = 3 key tiles: mma.sync
  expect_plan("1 x 4096, window 256", Step({{0, 4096}}).plan(32, 256), mma, 128, 32);
  // the same under a 1,024-token window: 9 key tiles from the ninth tile on: wgmma
  expect_plan("1 x 4096, window 1024", Step({{0, 4096}}).plan(32, 1024), wgmma, 128, 32);
  // forced: the kernel (wgmma always takes 128 rows) and the mma.sync kernel's rows
  expect_plan("16 x 512, wgmma forced", Step(sixteen).plan(32, 0, wgmma), wgmma, 128, 64);
  expect_plan("1 x 8192, mma forced", Step({{0, 8192}}).plan(32, 0, mma), mma, 128, 64);
  expect_plan("1 x 8192, mma forced at 64 rows", Step({{0, 8192}}).plan(32, 0, mma, 64), mma, 64, 128);

  // the wgmma kernel's grid: persistent (one CTA per SM) by default, one CTA per (tile, head) when forced off; the
  // mma.sync kernel has no persistent grid
  expect_eq("1 x 8192: persistent CTAs", Step({{0, 8192}}).plan(32).ctas, 132);
  expect_eq("1 x 8192, persistent forced off", Step({{0, 8192}}).plan(32, 0, FlashKernel::kAuto, 0, nullptr, 0).ctas, 0);
  expect_eq("16 x 512, wgmma forced: persistent CTAs", Step(sixteen).plan(32, 0, wgmma).ctas, 132);
  expect_eq("1 x 768 (mma.sync): no persistent grid", Step({{0, 768}}).plan(32, 0, FlashKernel::kAuto, 0, nullptr, 1).ctas, 0);

  // the tiles: rows of one sequence consecutive, never across sequences, at most `rows` each
  std::vector<int32_t> t;
  const FlashPlan p = Step({{0, 130}, {7, 1}, {0, 64}}).plan(8, 0, mma, 64, &t);
  expect_plan("130 + 1 + 64 at 64 rows", p, mma, 64, 5);
  const std::vector<int32_t> want = {0, 64, 64, 64, 128, 2, 130, 1, 131, 64};
  for (size_t i = 0; i < want.size(); ++i) expect_eq("tile field " + std::to_string(i), t[i], want[i]);
  expect_eq("nothing written past the tiles", t[want.size()], -1);

  if (failures) {
    std::printf("%d of %d checks failed\n", failures, cases);
    return 1;
  }
  std::printf("all %d checks pass\n", cases);
  return 0;
}
