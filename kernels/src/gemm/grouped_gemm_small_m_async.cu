// Host launcher of the small-M "async" schedule (grouped_gemm_small_m_async.cuh); called from
// launch_small_m (grouped_gemm_small_m.cu) when g_small_m_impl == 4, after its argument checks.
#include "grouped_gemm.h"
#include "grouped_gemm_small_m_async.cuh"
#include "../common/check.h"

namespace dispatch {

namespace {

constexpr int kMaxDevices = 64;

template <bool kInt8, int NT, int kStages>
void launch_async(const __nv_bfloat16* x, const uint8_t* w, const float* scales, __nv_bfloat16* y, ExpertRows rows,
                  int E, int N, int K, int max_active, bool fuse_silu, cudaStream_t stream) {
  auto* kernel = grouped_gemm_small_m_async_kernel<kInt8, NT, kStages>;
  constexpr int kRing = small_m_async_ring_bytes<kStages>();
  // The ring is dynamic shared memory past 48 KB: the opt-in holds per device, so it is set once per
  // device; SM count and occupancy likewise (no per-launch host query beyond the launch).
  static int sms[kMaxDevices], per_sm[kMaxDevices];
  int dev = 0;
  DK_CUDA(cudaGetDevice(&dev));
  DK_CHECK(dev < kMaxDevices, "device index too large");
  if (!sms[dev]) {
    DK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRing));
    DK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm[dev], kernel, kSmallWarps * 32, kRing));
    DK_CUDA(cudaDeviceGetAttribute(&sms[dev], cudaDevAttrMultiProcessorCount, dev));
  }
  const int nblk = N / kSmallRows, chunks = K / SmallMChunk<kInt8>::kK;
  const long long ctas = (long long)nblk * max_active, resident = (long long)sms[dev] * (per_sm[dev] > 0 ? per_sm[dev] : 1);
  const int waves = int((ctas + resident - 1) / resident);
  // Row blocks per CTA: the legacy kernel's measured bf16 rule (as many as waves when 1-3 waves: one
  // wave whose warps stream on across row blocks; else one), raised so a CTA has at least 8 (row block,
  // chunk) items for its 4 warps when K is short (int8 Qwen3 down: 6 chunks -> 2 row blocks).
  int rb = g_small_m_rb > 0 ? g_small_m_rb : waves <= 3 ? waves : 1;
  if (g_small_m_rb <= 0 && rb * chunks < 2 * kSmallWarps) rb = (2 * kSmallWarps + chunks - 1) / chunks;
  rb = rb < 1 ? 1 : rb > small_m_slots<NT>() ? small_m_slots<NT>() : rb;
  const dim3 grid((nblk + rb - 1) / rb, max_active);
  kernel<<<grid, kSmallWarps * 32, kRing, stream>>>(x, w, scales, y, rows, E, N, K, int(fuse_silu), rb);
}

template <bool kInt8, int kStages>
void launch_async_nt(int nt, const __nv_bfloat16* x, const uint8_t* w, const float* scales, __nv_bfloat16* y,
                     ExpertRows rows, int E, int N, int K, int max_active, bool fuse_silu, cudaStream_t stream) {
  switch (nt) {
    case 1: launch_async<kInt8, 1, kStages>(x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream); break;
    case 2: launch_async<kInt8, 2, kStages>(x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream); break;
    case 4: launch_async<kInt8, 4, kStages>(x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream); break;
    default: launch_async<kInt8, 8, kStages>(x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream); break;
  }
}

}  // namespace

// nt: 8-token tiles per pass (1, 2, 4, 8); stages: ring items per warp (g_small_m_depth: 4, else 8).
void launch_small_m_async(bool int8, int nt, const void* X, const void* W, const float* scales, void* Y,
                          ExpertRows rows, int E, int N, int K, int max_active, bool fuse_silu, cudaStream_t stream) {
  auto* x = static_cast<const __nv_bfloat16*>(X);
  auto* w = static_cast<const uint8_t*>(W);
  auto* y = static_cast<__nv_bfloat16*>(Y);
  const bool four = g_small_m_depth == 4;
  if (int8) {
    if (four) launch_async_nt<true, 4>(nt, x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream);
    else launch_async_nt<true, 8>(nt, x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream);
  } else {
    if (four) launch_async_nt<false, 4>(nt, x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream);
    else launch_async_nt<false, 8>(nt, x, w, scales, y, rows, E, N, K, max_active, fuse_silu, stream);
  }
  DK_LAUNCHED();
}

}  // namespace dispatch
