// How a grouped GEMM finds each expert's rows (DeepGEMM's two layouts, one descriptor).
//   contiguous: rows of expert e are [offsets[e], offsets[e+1]) of one [M, K] matrix (prefill).
//   masked:     rows of expert e are [e*cap, e*cap + counts[e]) of an [E, cap, K] tensor (decode
//               under CUDA graphs: the launch shape depends only on cap, never on the counts).
// Both arrays live in device memory; no host ever reads them, so nothing syncs.
#pragma once

namespace dispatch {

struct ExpertRows {
  const int* offsets;  // [E+1] (contiguous) or nullptr
  const int* counts;   // [E] (masked) or nullptr
  int cap;             // masked capacity per expert; unused when contiguous

#ifdef __CUDACC__
  __device__ __forceinline__ int begin(int e) const { return offsets ? __ldg(offsets + e) : e * cap; }
  __device__ __forceinline__ int count(int e) const {
    return offsets ? __ldg(offsets + e + 1) - __ldg(offsets + e) : __ldg(counts + e);
  }
#endif
};

}  // namespace dispatch
