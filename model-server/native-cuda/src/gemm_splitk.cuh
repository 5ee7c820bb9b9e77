// Split K and the epilogue of gemm_mma.cuh's tensor-core GEMMs (gemm.cu's WMMA tiles share the
// workspace and splitk_last; gemm_stream.cuh uses sm_count).
//
// Each split stores its fp32 partial sums to a workspace [split][T][N] and bumps its output tile's
// counter; the tile's last CTA adds the partials in split order 0..S-1, then bias, then the old Y
// when accumulating, and writes Y once, so Y's bits do not depend on which CTA finishes when (the
// counter goes back to 0 for the next launch or graph replay). DISPATCH_CUDA_GEMM_ATOMIC_SPLITK=1:
// the earlier fp32 atomicAdd into Y (zeroed first unless accumulating), whose sum order depends on
// scheduling. Host side: how many splits (pick_splits) and the occupancy it is weighed against.
// Legend: T tokens (MMA rows), N output features; gid = lane / 4, tig = lane % 4.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include "check.h"

namespace dcuda {
namespace mma {

// Deterministic split K (see the top): ws [splits][T][N] fp32 partials, one counter per output
// tile (all zero between launches). ws == nullptr: no split, or the atomic split.
struct SplitK {
  float* ws = nullptr;
  unsigned* counters = nullptr;
};

// gemm.cu: the stream's split-K workspace holding `floats` partials and `tiles` counters (grown
// outside a capture only), and whether DISPATCH_CUDA_GEMM_ATOMIC_SPLITK=1 (or the harness's
// override) asks for the atomic split instead.
SplitK splitk_workspace(size_t floats, size_t tiles, cudaStream_t s);
bool atomic_splitk();

// Epilogue for one accumulator pair: Y[t, n..n+1] from c (bias added by split 0 only).
// vec2: N even and Y 8-byte aligned (float2 stores / atomics).
__device__ __forceinline__ void store_pair(float* __restrict__ Y, int T, int N, int t, int n, float v0, float v1,
                                           const float* __restrict__ bias, bool accumulate, bool atomic,
                                           bool vec2) {
  if (t >= T || n >= N) return;
  if (bias != nullptr) {
    v0 += bias[n];
    if (n + 1 < N) v1 += bias[n + 1];
  }
  float* y = Y + size_t(t) * N + n;
  if (vec2) {  // n even, N even: n + 1 < N
    if (atomic) {
      atomicAdd(reinterpret_cast<float2*>(y), make_float2(v0, v1));
    } else {
      float2 o = make_float2(v0, v1);
      if (accumulate) {
        const float2 p = *reinterpret_cast<const float2*>(y);
        o.x += p.x, o.y += p.y;
      }
      *reinterpret_cast<float2*>(y) = o;
    }
    return;
  }
  if (atomic) {
    atomicAdd(y, v0);
    if (n + 1 < N) atomicAdd(y + 1, v1);
  } else {
    y[0] = accumulate ? y[0] + v0 : v0;
    if (n + 1 < N) y[1] = accumulate ? y[1] + v1 : v1;
  }
}

// Split z's partial for Y[t, n..n+1] into the workspace (L2 only: the last CTA reads it from
// another SM).
__device__ __forceinline__ void partial_pair(float* __restrict__ ws, int T, int N, int z, int t, int n, float v0,
                                             float v1, bool vec2) {
  if (t >= T || n >= N) return;
  float* p = ws + (size_t(z) * T + t) * N + n;
  if (vec2) {
    __stcg(reinterpret_cast<float2*>(p), make_float2(v0, v1));
    return;
  }
  __stcg(p, v0);
  if (n + 1 < N) __stcg(p + 1, v1);
}

// True in every thread of the tile's last CTA to arrive (its counter back at 0), after which the
// other splits' partials are visible. Every thread of the CTA calls it, after its partial_pair()s.
__device__ __forceinline__ bool splitk_last(unsigned* counter, int splits) {
  __shared__ int last;
  __threadfence();  // this thread's partials reach L2 before the CTA's arrival is counted
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    last = atomicAdd(counter, 1u) == unsigned(splits - 1);
    if (last) atomicExch(counter, 0u);  // every split has arrived: the next launch finds it at 0
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// The last CTA's epilogue for Y[t, n..n+1]: the partials in split order (its own split z from
// registers, the same value it stored), then bias and the old Y (store_pair).
__device__ __forceinline__ void reduce_pair(const float* __restrict__ ws, float* __restrict__ Y, int T, int N, int z,
                                            int splits, int t, int n, float v0, float v1,
                                            const float* __restrict__ bias, bool accumulate, bool vec2) {
  if (t >= T || n >= N) return;
  float s0 = 0.f, s1 = 0.f;
  for (int s = 0; s < splits; ++s) {
    float p0 = v0, p1 = v1;
    if (s != z) {
      const float* p = ws + (size_t(s) * T + t) * N + n;
      if (vec2) {
        const float2 q = __ldcg(reinterpret_cast<const float2*>(p));
        p0 = q.x, p1 = q.y;
      } else {
        p0 = __ldcg(p);
        p1 = n + 1 < N ? __ldcg(p + 1) : 0.f;
      }
    }
    s0 = s == 0 ? p0 : s0 + p0;
    s1 = s == 0 ? p1 : s1 + p1;
  }
  store_pair(Y, T, N, t, n, s0, s1, bias, accumulate, false, vec2);
}

// The epilogue of one thread's mma.sync accumulators acc[I][J][4], shared by the kernels: pair
// (i, j, h) is Y[row(i, h), col(j) .. col(j) + 1] from acc[i][j][2h..2h+1], and pre(i, j) runs
// before pair (i, j, *) is used (the skinny GEMM adds its second K group there). Each kernel
// branches on sk.ws itself, so the code is the same as when it held these loops.
//
// Without a workspace (no split, or the atomic split): store_pair each pair.
template <int I, int J, typename Pre, typename Row, typename Col>
__device__ __forceinline__ void store_pairs(float (&acc)[I][J][4], Pre pre, Row row, Col col, float* __restrict__ Y,
                                            int T, int N, const float* __restrict__ bias, bool accumulate,
                                            bool atomic, bool vec2) {
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j) {
      pre(i, j);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        store_pair(Y, T, N, row(i, h), col(j), acc[i][j][2 * h], acc[i][j][2 * h + 1], bias, accumulate, atomic, vec2);
    }
}

// The deterministic split (sk.ws set): own threads (those holding output) write this split's
// partials, every thread of the CTA takes part in splitk_last, and the tile's last CTA writes Y
// through reduce_pair. kSplitZ: K split along grid.z, tiles along x and y (tiled); else along
// grid.y, tiles along x (skinny). The grid is read where the kernels read it before.
template <bool kSplitZ, int I, int J, typename Pre, typename Row, typename Col>
__device__ __forceinline__ void splitk_pairs(float (&acc)[I][J][4], Pre pre, Row row, Col col, bool own,
                                             float* __restrict__ Y, int T, int N, const float* __restrict__ bias,
                                             bool accumulate, bool vec2, SplitK sk) {
  const int z = kSplitZ ? blockIdx.z : blockIdx.y;
  if (own) {
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int j = 0; j < J; ++j) {
        pre(i, j);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          partial_pair(sk.ws, T, N, z, row(i, h), col(j), acc[i][j][2 * h], acc[i][j][2 * h + 1], vec2);
      }
  }
  unsigned* counter = kSplitZ ? sk.counters + blockIdx.y * gridDim.x + blockIdx.x : sk.counters + blockIdx.x;
  if (!splitk_last(counter, kSplitZ ? gridDim.z : gridDim.y) || !own) return;
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        reduce_pair(sk.ws, Y, T, N, z, kSplitZ ? gridDim.z : gridDim.y, row(i, h), col(j), acc[i][j][2 * h],
                    acc[i][j][2 * h + 1], bias, accumulate, vec2);
}

// ---- host: how many splits ------------------------------------------------------------------
inline bool y_vec2(const float* Y, int N) { return N % 2 == 0 && reinterpret_cast<uintptr_t>(Y) % 8 == 0; }

// CTAs of `kernel` resident on the whole GPU at once (occupancy x SMs).
inline int sm_count() {
  int dev = 0, sms = 0;
  DC_CUDA(cudaGetDevice(&dev));
  DC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

template <typename Kernel>
int resident_ctas(Kernel kernel, int threads, size_t smem) {
  int per_sm = 0;
  DC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return std::max(1, per_sm) * sm_count();
}

// K splits for `ctas_n` CTAs along N over `k_steps` steps, each split a multiple of `step_multiple`
// steps and at least `min_steps` long: the fewest for which every SM gets a CTA and all CTAs are
// resident at once (`slots`), or that fill whole waves (>= 85% of the last wave busy); else the
// best-filled. Fewer splits mean fewer partial sums to write and add.
inline int pick_splits(int ctas_n, int k_steps, int min_steps, int step_multiple, int sms, int slots) {
  int best = 1, last = 0;
  double best_eff = -1;
  for (int sp = 1; sp <= k_steps; ++sp) {
    int chunk = (k_steps + sp - 1) / sp;
    chunk = (chunk + step_multiple - 1) / step_multiple * step_multiple;
    if (chunk < min_steps && sp > 1) break;
    const int actual = (k_steps + chunk - 1) / chunk;
    if (actual == last) continue;
    last = actual;
    const long ctas = long(ctas_n) * actual;
    if (ctas >= sms && ctas <= slots) return actual;
    const long waves = (ctas + slots - 1) / slots;
    const double eff = ctas <= slots ? double(ctas) / sms : double(ctas) / double(waves * slots);
    if (ctas > slots && eff >= 0.85) return actual;
    if (eff > best_eff + 1e-9) best_eff = eff, best = actual;
  }
  return best;
}

}  // namespace mma
}  // namespace dcuda
