// The prefill attention's tile plan (flash_plan.h): host code only, no device state.
#include "flash_plan.h"
#include <algorithm>
#include <cstddef>
#include <vector>

namespace dcuda {
namespace {

// The wgmma kernel takes a step whose (128-row tile, 128-key tile, head) products give every SM at least one: prefill
// check, session 25 (one CTA per item, the Q rows loaded in one batch, the tiles most keys first, 64-key tiles at
// D 128): 1.23-1.29x the mma.sync kernel at 32 x 256 and 16 x 512, 1.36-1.50x at 1,024-8,192-token prompts, 1.35x
// on a 200-token window, 1.74x on one row after 5,000 keys; 0.90x at D 64 under a 128-token window over 16 x 300
// (the one loss); below one product per SM (a few short sequences) 0.95-1.01x, so those keep the mma.sync kernel.
// The wgmma kernel can run as one persistent CTA per SM walking the (tile, head) items (its K/V ring running on across
// them): prefill check, session 26 (after the hang's fix; session 25's final check within 0.04): 1.14x one CTA
// per item at 32 x 256 (mean 1.5 128-key tiles per tile), 1.09x at 16 x 512 (2.5), 1.04x at 8 x 1,024 (4.5), 0.95x at
// 2 x 2,048 (8.5), 0.97x at 1 x 4,096 (16.5), 0.88-0.92x at 1 x 8,192 (32.5); 1.19x on a 128-token window: the
// hardware's block scheduler has nothing to overlap one short item's pipeline fill with, and a persistent grid's last
// round idles SMs where items are long. So it takes the steps whose tiles see fewer than kWgmmaPersistentMaxKeyTiles
// key tiles on average (prompts of up to ~1,300 tokens), the rest a CTA per item. It was opt-in for a session: it hung
// the model about one run in 30 until every compute warp released its K/V stages itself (session 26, 100 of 100 runs
// since, docs/cuda-backend.md "Session 26 runs"). DISPATCH_CUDA_FLASH_PERSISTENT=0|1 forces either grid.
// Since session 27 the rounds are dealt alternately forwards and backwards (attention_flash_wgmma.cu), which evens the
// CTAs' loads on longer prompts: prefill-check 1.01x at 2 x 2,048 and 1.00x at 1 x 4,096 (strided 0.95x / 0.97x), still
// 0.95x at 1 x 8,192 (32.5 key tiles per tile), so the bound is 32 (docs/cuda-backend.md "Session 27 runs").
constexpr int kWgmmaPersistentMaxKeyTiles = 32;

// Calls on_tile(first row, rows) for each tile of up to `rows` consecutive rows of one sequence; returns the count.
template <class OnTile>
int walk_tiles(const int32_t* tok_seq, int T, int rows, OnTile on_tile) {
  int n_tiles = 0;
  for (int t = 0; t < T;) {
    int n = 1;
    while (t + n < T && n < rows && tok_seq[t + n] == tok_seq[t]) ++n;
    on_tile(t, n);
    ++n_tiles;
    t += n;
  }
  return n_tiles;
}

}  // namespace

FlashPlan plan_flash(const FlashPlanInputs& in, int32_t* tiles) {
  size_t key_tiles = 0;  // 128-key tiles over the 128-row tiles
  const int wide_tiles = walk_tiles(in.tok_seq, in.T, 128, [&](int t, int n) {
    const int lo = in.window > 0 ? std::max(0, in.pos[t] - in.window + 1) : 0;
    key_tiles += size_t(in.pos[t + n - 1] - lo) / 128 + 1;
  });
  const size_t wide_ctas = size_t(wide_tiles) * in.Hq, sms = size_t(in.sms);
  FlashPlan plan;
  plan.kernel = in.want;
  if (plan.kernel == FlashKernel::kAuto)
    plan.kernel = key_tiles * size_t(in.Hq) >= sms ? FlashKernel::kWgmma : FlashKernel::kMma;
  if (plan.kernel == FlashKernel::kWgmma) {
    plan.rows = 128;
    const bool persistent =
        in.persistent >= 0 ? in.persistent == 1
                           : key_tiles < size_t(kWgmmaPersistentMaxKeyTiles) * wide_tiles;
    plan.ctas = persistent ? in.sms : 0;
  } else plan.rows = in.mma_rows != 0 ? in.mma_rows : wide_ctas >= 2 * sms ? 128 : 64;
  // The tiles in the order the kernels take them: most keys first (by the keys the tile's last row sees; ties in row
  // order), so the longest CTAs start first and each round of a persistent grid deals items of about one cost.
  struct Tile {
    int keys, first, rows;
  };
  std::vector<Tile> order;
  plan.num_tiles = walk_tiles(in.tok_seq, in.T, plan.rows, [&](int t, int n) {
    const int lo = in.window > 0 ? std::max(0, in.pos[t] - in.window + 1) : 0;
    if (tiles) order.push_back({in.pos[t + n - 1] - lo + 1, t, n});
  });
  if (tiles) {
    std::stable_sort(order.begin(), order.end(), [](const Tile& x, const Tile& y) { return x.keys > y.keys; });
    for (size_t i = 0; i < order.size(); ++i) tiles[2 * i] = order[i].first, tiles[2 * i + 1] = order[i].rows;
  }
  return plan;
}

}  // namespace dcuda
