// The prefill attention's tile plan (flash_plan.h): host code only, no device state.
#include "flash_plan.h"
#include <algorithm>
#include <cstddef>

namespace dcuda {
namespace {

// mean 128-key tiles per 128-row tile from which the wgmma kernel takes a step: its CTA (one per SM) pays a pipeline
// fill per tile and wins where tiles see many keys (prefill check, session 16: 1.2-1.5x at 2,048-8,192-token prompts,
// 0.86x at 16 x 512)
constexpr int kWgmmaMinKeyTiles = 4;
// the wgmma kernel as one persistent CTA per SM walking the (tile, head) items, its K/V ring running on across them
constexpr bool kWgmmaPersistent = true;

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
    plan.kernel = wide_ctas >= sms && key_tiles >= size_t(kWgmmaMinKeyTiles) * wide_tiles ? FlashKernel::kWgmma
                                                                                        : FlashKernel::kMma;
  if (plan.kernel == FlashKernel::kWgmma) {
    plan.rows = 128;
    const bool persistent = in.persistent >= 0 ? in.persistent == 1 : kWgmmaPersistent;
    plan.ctas = persistent ? in.sms : 0;
  } else plan.rows = in.mma_rows != 0 ? in.mma_rows : wide_ctas >= 2 * sms ? 128 : 64;
  int i = 0;
  plan.num_tiles = walk_tiles(in.tok_seq, in.T, plan.rows, [&](int t, int n) {
    if (tiles) tiles[2 * i] = t, tiles[2 * i + 1] = n;
    ++i;
  });
  return plan;
}

}  // namespace dcuda
