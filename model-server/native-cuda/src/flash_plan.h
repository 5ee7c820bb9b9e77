// The prefill attention's tile plan as a pure function of the step (flash_plan.cu): which kernel, how many query rows
// per tile, and the tiles. attention_flash.cu's plan_attention_flash adds the device's SM count and the environment
// switches; tests call this directly (scripts/flash_plan_test.cu, no GPU).
#pragma once
#include <cstdint>
#include "ops.h"

namespace dcuda {

struct FlashPlanInputs {
  const int32_t* tok_seq = nullptr;  // [T] the sequence of each row (rows of one sequence consecutive)
  const int32_t* pos = nullptr;      // [T] each row's position
  int T = 0, Hq = 0, window = 0;     // window as AttentionArgs'
  int sms = 0;                       // SMs of the device
  FlashKernel want = FlashKernel::kAuto;  // kAuto: the rule (ops.h, plan_attention_flash)
  int mma_rows = 0;                  // the mma.sync kernel's rows, forced (64 or 128); 0: the rule
  int persistent = -1;               // the wgmma kernel's persistent grid: 0 off, 1 on, -1 the rule
};

// Writes the tiles (first row, rows) into tiles[0, 2 * num_tiles) (room for 2 T values; null: count only), in the
// order the kernels take them: most keys first.
FlashPlan plan_flash(const FlashPlanInputs& in, int32_t* tiles);

}  // namespace dcuda
