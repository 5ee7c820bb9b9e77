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
  // 64 tiles x 32 heads, each tile seeing 1-4 key tiles (160 x 32 products): wgmma
  expect_plan("16 x 512", Step(sixteen).plan(32), wgmma, 128, 64);
  // one 8,192-token prompt: 64 tiles of 1..64 key tiles: wgmma
  expect_plan("1 x 8192", Step({{0, 8192}}).plan(32), wgmma, 128, 64);
  // two 2,048-token prompts: wgmma
  expect_plan("2 x 2048", Step({{0, 2048}, {0, 2048}}).plan(32), wgmma, 128, 32);
  // 768 tokens: 6 tiles seeing 1..6 key tiles, 21 x 32 products: wgmma
  expect_plan("1 x 768", Step({{0, 768}}).plan(32), wgmma, 128, 6);
  // a 100-token chunk after a 5,000-token cached prefix: one tile, 40 key tiles x 32 heads: wgmma
  expect_plan("prefix 5000 + 100", Step({{5000, 100}}).plan(32), wgmma, 128, 1);
  // the same chunk after a 300-token prefix: 4 key tiles x 32 heads = 128 products < 132 SMs: mma.sync, 64-row tiles
  expect_plan("prefix 300 + 100", Step({{300, 100}}).plan(32), mma, 64, 2);
  // three 77-token prompts: 3 x 32 products: mma.sync; 64-row tiles (6 x 32 CTAs < 2 x 132)
  expect_plan("3 x 77", Step({{0, 77}, {0, 77}, {0, 77}}).plan(32), mma, 64, 6);
  // a 4,096-token prompt under a 256-token window: each tile sees (127 + 255) / 128 + 1 = 3 key tiles: wgmma
  expect_plan("1 x 4096, window 256", Step({{0, 4096}}).plan(32, 256), wgmma, 128, 32);
  // 300 tokens under a 1-token window, 8 heads: 3 x 8 products: mma.sync
  expect_plan("1 x 300, window 1, 8 heads", Step({{0, 300}}).plan(8, 1), mma, 64, 5);
  // forced: the kernel (wgmma always takes 128 rows) and the mma.sync kernel's rows
  expect_plan("16 x 512, wgmma forced", Step(sixteen).plan(32, 0, wgmma), wgmma, 128, 64);
  expect_plan("1 x 8192, mma forced", Step({{0, 8192}}).plan(32, 0, mma), mma, 128, 64);
  expect_plan("1 x 8192, mma forced at 64 rows", Step({{0, 8192}}).plan(32, 0, mma, 64), mma, 64, 128);

  // the wgmma kernel's grid: one CTA per SM where tiles see fewer than 32 key tiles on average, else one CTA per
  // (tile, head) (flash_plan.cu); either when forced; the mma.sync kernel has no persistent grid
  expect_eq("16 x 512: persistent", Step(sixteen).plan(32).ctas, 132);
  expect_eq("16 x 512, persistent forced on", Step(sixteen).plan(32, 0, FlashKernel::kAuto, 0, nullptr, 1).ctas, 132);
  expect_eq("16 x 512, persistent forced off", Step(sixteen).plan(32, 0, FlashKernel::kAuto, 0, nullptr, 0).ctas, 0);
  const std::vector<std::pair<int, int>> eight(8, {0, 1024}), four(4, {0, 1536});
  expect_eq("8 x 1024 (4.5 key tiles per tile): persistent", Step(eight).plan(32).ctas, 132);
  expect_eq("4 x 1536 (6.5): persistent", Step(four).plan(32).ctas, 132);
  expect_eq("2 x 2048 (8.5): persistent", Step({{0, 2048}, {0, 2048}}).plan(32).ctas, 132);
  expect_eq("1 x 4096 (16.5): persistent", Step({{0, 4096}}).plan(32).ctas, 132);
  expect_eq("1 x 8192: one CTA per item", Step({{0, 8192}}).plan(32).ctas, 0);
  expect_eq("1 x 8192, persistent forced on",
            Step({{0, 8192}}).plan(32, 0, FlashKernel::kAuto, 0, nullptr, 1).ctas, 132);
  expect_eq("3 x 77 (mma.sync): no persistent grid",
            Step({{0, 77}, {0, 77}, {0, 77}}).plan(32, 0, FlashKernel::kAuto, 0, nullptr, 1).ctas, 0);

  // the tiles: rows of one sequence consecutive, never across sequences, at most `rows` each
  std::vector<int32_t> t;
  const FlashPlan p = Step({{0, 130}, {7, 1}, {0, 64}}).plan(8, 0, mma, 64, &t);
  expect_plan("130 + 1 + 64 at 64 rows", p, mma, 64, 5);
  // in the kernels' order: most keys first (keys of each tile's last row: 130, 128, 64, 64 and 8; ties in row order)
  const std::vector<int32_t> want = {128, 2, 64, 64, 0, 64, 131, 64, 130, 1};
  for (size_t i = 0; i < want.size(); ++i) expect_eq("tile field " + std::to_string(i), t[i], want[i]);
  expect_eq("nothing written past the tiles", t[want.size()], -1);
  // 16 prompts of 512 in 128-row tiles: the 16 last tiles (512 keys each) first, in row order, then the 384-key ones
  std::vector<int32_t> u;
  Step(sixteen).plan(32, 0, wgmma, 0, &u);
  for (int i = 0; i < 16; ++i) expect_eq("16 x 512: tile " + std::to_string(i), u[2 * i], 512 * i + 384);
  expect_eq("16 x 512: tile 16", u[32], 256);

  if (failures) {
    std::printf("%d of %d checks failed\n", failures, cases);
    return 1;
  }
  std::printf("all %d checks pass\n", cases);
  return 0;
}
