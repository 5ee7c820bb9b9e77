// Device helpers shared by native-ep's kernel files.
#pragma once
#include <cuda_runtime.h>

namespace dispatch::ep {

constexpr int kMaxK = 32;

// Slots of one token ordered by ascending key (ties: slot order; key < 0: skipped) into shared
// `order`; returns how many. Every thread of the block must call it (it synchronizes).
__device__ inline int sortSlots(const int* keys, int k, int* order) {
  __shared__ int n_s;
  if (threadIdx.x == 0) {
    int n = 0;
    for (int j = 0; j < k; ++j) {
      if (keys[j] < 0) continue;
      int p = n++;
      while (p > 0 && keys[order[p - 1]] > keys[j]) { order[p] = order[p - 1]; --p; }
      order[p] = j;
    }
    n_s = n;
  }
  __syncthreads();
  return n_s;
}

}  // namespace dispatch::ep
