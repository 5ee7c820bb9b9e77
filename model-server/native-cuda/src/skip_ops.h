// DISPATCH_CUDA_SKIP_OPS, a debug cost probe for model.cu (docs/cuda-backend.md, Environment):
// op groups (the profile's mark names) left out of steps of <= 64 tokens, so graph replay with
// and without one gives its cost. Only groups whose outputs are plain activations: left stale,
// they hold some earlier step's or layer's finite values (model.cu zeroes its scratch at
// allocation in this mode). The routing (topk_align_permute) is not one of them: stale
// counts/offsets/slot_row from a step of another size could send the expert GEMMs and the
// combine outside this step's rows.
#pragma once
#include <string>
#include "check.h"

namespace dcuda {

enum SkipOp { kSkipQkvProj, kSkipQkvPost, kSkipAttention, kSkipOProj, kSkipNormRouter, kSkipExperts, kSkipCombine };
inline const char* const kSkippable[] = {"qkv_proj",     "qkv_post",          "attention",
                                         "o_proj",       "norm_router_logits", "expert_gemms",
                                         "combine_norm"};  // SkipOp order
constexpr int kSkipMaxTokens = 64;

inline bool skipped(unsigned mask, SkipOp op, int T) { return (mask >> op & 1u) && T <= kSkipMaxTokens; }

// The mask of a comma-, '+'- or space-separated list; throws on a name it does not allow.
inline unsigned parse_skip_ops(const char* v) {
  std::string allowed;
  for (const char* n : kSkippable) allowed += std::string(allowed.empty() ? "" : ", ") + n;
  unsigned mask = 0;
  std::string list(v), name;
  list += ',';
  for (char ch : list) {
    if (ch != ',' && ch != '+' && ch != ' ') {
      name += ch;
      continue;
    }
    if (name.empty()) continue;
    int i = 0;
    while (i < int(sizeof(kSkippable) / sizeof(kSkippable[0])) && name != kSkippable[i]) ++i;
    DC_CHECK(i < int(sizeof(kSkippable) / sizeof(kSkippable[0])),
             "DISPATCH_CUDA_SKIP_OPS: '" + name + "' cannot be skipped" +
                 (name == "topk_align_permute" ? " (the routing: stale slot_row/offsets are unsafe)" : "") +
                 "; the op groups that can: " + allowed);
    mask |= 1u << i;
    name.clear();
  }
  return mask;
}

}  // namespace dcuda
