// L2 prefetch of weights the step reads next, issued by the latency-bound kernels between the
// weight-reading ones (qkv_post, route_small, moe_combine_norm), so HBM keeps streaming while
// they run and the next GEMV / grouped GEMM finds its first bytes in L2. Hopper's bulk prefetch
// (cp.async.bulk.prefetch.L2, sm_90) is a hint: it writes nothing, needs no completion wait and
// cannot change a result, only the time.
//
// A prefetch is up to kL2Parts ranges: part p of item u is [base[p] + id(u) * bytes[p], +bytes[p])
// with id(u) = u for plain ranges (one item) or the u-th routed expert id (route_small), parts
// in order and items in order inside a part, cut into kL2Chunk-byte bulk prefetches spread over
// every thread of the grid, and stopped at `budget` bytes (what runs too far ahead is evicted
// before it is read, and then read twice). DISPATCH_CUDA_L2_PREFETCH=0: no prefetch;
// DISPATCH_CUDA_L2_PREFETCH_MB: the budget (default 48; the H200's L2 is 60 MB).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace dcuda {

constexpr int kL2Parts = 4;
constexpr uint32_t kL2Chunk = 32 * 1024;
// Launchers whose own grid is small (moe_combine_norm at batch 1 is one CTA) add CTAs up to this
// many so the bulk prefetches leave from many SMs, not one SM's copy engine.
constexpr int kL2PrefetchCtas = 32;

struct L2Prefetch {
  const char* base[kL2Parts];
  uint32_t bytes[kL2Parts];  // per item, a multiple of 16 (base 16-byte aligned)
  int parts;                 // 0: nothing to prefetch
  uint32_t budget;           // bytes over all parts and items
  // plain ranges: issued before the kernel's pdl_wait (while the previous kernel, itself often
  // weight-bound, still runs) instead of after it (DISPATCH_CUDA_L2_PREFETCH=early, for A/B)
  bool early;
};

// DISPATCH_CUDA_L2_PREFETCH(_MB), read once: the budget in bytes, 0 when off.
inline uint32_t l2_prefetch_budget() {
  static const uint32_t budget = [] {
    const char* on = std::getenv("DISPATCH_CUDA_L2_PREFETCH");
    if (on && on[0] == '0' && on[1] == 0) return 0u;
    const char* mb = std::getenv("DISPATCH_CUDA_L2_PREFETCH_MB");
    const long v = mb ? std::atol(mb) : 48;
    return v <= 0 ? 0u : uint32_t(v > 4000 ? 4000 : v) << 20;
  }();
  return budget;
}

inline bool l2_prefetch_early() {
  static const bool early = [] {
    const char* on = std::getenv("DISPATCH_CUDA_L2_PREFETCH");
    return on && std::strcmp(on, "early") == 0;
  }();
  return early;
}

// Appends [p, p + bytes) as a part (host side): its start rounded up to 16 bytes and its length
// down to a multiple of 16, so it stays inside the range; a null p, an empty range or a full
// L2Prefetch adds nothing.
inline void l2_add(L2Prefetch& f, const void* p, size_t bytes) {
  if (!p || f.parts >= kL2Parts) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), b = (a + 15) & ~uintptr_t(15);
  if (bytes <= b - a) return;
  bytes = (bytes - (b - a)) & ~size_t(15);
  if (bytes == 0 || bytes > 0xffffffffu) return;
  f.base[f.parts] = reinterpret_cast<const char*>(b);
  f.bytes[f.parts] = uint32_t(bytes);
  ++f.parts;
}

// Appends a part of per-item ranges [p + id * bytes, +bytes) (host side): only when p is 16-byte
// aligned and bytes a multiple of 16 (so is every item's start), else nothing.
inline void l2_add_items(L2Prefetch& f, const void* p, size_t bytes) {
  if (!p || f.parts >= kL2Parts || reinterpret_cast<uintptr_t>(p) % 16 || bytes % 16 || bytes == 0 ||
      bytes > 0xffffffffu)
    return;
  f.base[f.parts] = static_cast<const char*>(p);
  f.bytes[f.parts] = uint32_t(bytes);
  ++f.parts;
}

#if defined(__CUDACC__)
__device__ __forceinline__ void l2_prefetch_bulk(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// Issues f's chunks that fall to thread `worker` of `workers` (every thread of the grid calls it
// with its own index). ids [items] (shared or global memory) maps item u to its index; null: one
// item, index 0. A chunk is issued only below the budget and never past the end of its range.
__device__ __forceinline__ void l2_prefetch(const L2Prefetch& f, const int* ids, int items, int worker, int workers) {
  uint64_t before = 0;  // bytes of the earlier parts
#pragma unroll  // constant indices: f stays in the parameter space, no local copy
  for (int p = 0; p < kL2Parts; ++p) {
    if (p >= f.parts) return;
    const uint32_t bytes = f.bytes[p];
    const int per = int((bytes + kL2Chunk - 1) / kL2Chunk);
    for (int j = worker; j < items * per; j += workers) {
      const int u = j / per;
      const uint32_t off = uint32_t(j - u * per) * kL2Chunk;
      if (before + uint64_t(u) * bytes + off >= f.budget) break;  // j only grows
      const int id = ids ? ids[u] : 0;
      l2_prefetch_bulk(f.base[p] + size_t(id) * bytes + off, min(kL2Chunk, bytes - off));
    }
    before += uint64_t(items) * bytes;
    if (before >= f.budget) return;
  }
}

// Plain ranges (one item), spread over every thread of the grid.
__device__ __forceinline__ void l2_prefetch_grid(const L2Prefetch& f) {
  if (f.parts) l2_prefetch(f, nullptr, 1, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}
#endif  // __CUDACC__

}  // namespace dcuda
