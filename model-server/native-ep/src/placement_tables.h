// Host-side placement tables behind DevPlacement (ep_kernels.cuh), built from EpConfig::placement
// with the rules of placement.ts: replicas of e in rank order, local index = position in the
// rank's list. Shared by the backends.
#pragma once
#include <algorithm>
#include <vector>
#include "check.h"
#include "ep.h"

namespace dispatch::ep {

struct PlacementTables {
  std::vector<int> rep;          // [E * max_rep], -1 padded
  std::vector<int> num_rep;      // [E]
  std::vector<int> local_index;  // [N * E], -1 where the rank lacks the expert
  int max_rep = 1;
  int le_max = 0;                // the largest local expert count
};

inline PlacementTables placementTables(const EpConfig& c) {
  const int N = c.num_ranks, E = c.num_experts;
  EP_CHECK(int(c.placement.size()) == N, "placement must list every rank");
  PlacementTables t;
  std::vector<std::vector<int>> reps(E);
  t.local_index.assign(size_t(N) * E, -1);
  for (int r = 0; r < N; ++r) {
    for (size_t i = 0; i < c.placement[r].size(); ++i) {
      const int e = c.placement[r][i];
      EP_CHECK(e >= 0 && e < E && t.local_index[size_t(r) * E + e] < 0, "placement names an expert outside [0, E) or twice");
      t.local_index[size_t(r) * E + e] = int(i);
      reps[e].push_back(r);
    }
    t.le_max = std::max(t.le_max, int(c.placement[r].size()));
  }
  for (int e = 0; e < E; ++e) {
    EP_CHECK(!reps[e].empty(), "an expert is on no rank");
    t.max_rep = std::max(t.max_rep, int(reps[e].size()));
  }
  t.rep.assign(size_t(E) * t.max_rep, -1);
  t.num_rep.resize(E);
  for (int e = 0; e < E; ++e) {
    t.num_rep[e] = int(reps[e].size());
    std::copy(reps[e].begin(), reps[e].end(), t.rep.begin() + size_t(e) * t.max_rep);
  }
  return t;
}

}  // namespace dispatch::ep
