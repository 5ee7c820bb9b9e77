// Host launcher for the TMA + wgmma prefill grouped GEMM: builds the two tensor maps (X as
// [M, K], W as [E*N, K], 128B swizzle) and launches one persistent CTA per multiprocessor.
#include <cudaTypedefs.h>
#include <atomic>
#include "grouped_gemm.h"
#include "sm90_bf16_grouped_gemm_contiguous.cuh"
#include "../common/check.h"
#include "../common/launch.h"

namespace dispatch {

// Prefill epilogue: 0 = direct (4-byte stores from the registers; the default until an H200 run
// shows the staged one faster), 1 = staged (shared memory, 16-byte row stores; needs Y 16-byte
// aligned, else the launch takes direct). Same output bits either way.
int g_contig_epilogue = 1;

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    DK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    DK_CHECK(q == cudaDriverEntryPointSuccess && p, "cuTensorMapEncodeTiled not found in the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

CUtensorMap make_map(const void* base, uint64_t rows, uint64_t k, uint32_t box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k * 2};
  const cuuint32_t box[2] = {uint32_t(ContigTile::kK), box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides,
                                 box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  DK_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed with code " + std::to_string(int(r)));
  return map;
}

// The shared-memory opt-in holds for the current device only: once per device and kernel (one
// process may drive several GPUs, native-cuda's expert parallelism).
template <bool kStaged>
void opt_in_smem(int dev) {
  static std::atomic<uint64_t> opted{0};
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (opted.load() & bit)) return;
  DK_CUDA(cudaFuncSetAttribute(sm90_bf16_grouped_gemm_contiguous_kernel<kStaged>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               kStaged ? ContigTile::kSmemBytesStaged : ContigTile::kSmemBytes));
  opted.fetch_or(bit);
}

}  // namespace

void sm90_bf16_grouped_gemm_contiguous(const void* X, const void* W, void* Y, const int* offsets, int M, int E,
                                       int N, int K, cudaStream_t stream, bool fuse_silu) {
  DK_CHECK(E > 0 && E <= ContigTile::kMaxExperts, "E must be in [1, 1024]");
  DK_CHECK(N % 16 == 0 && K % 8 == 0, "N must be a multiple of 16 and K of 8");
  DK_CHECK((reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(W)) % 16 == 0, "X and W must be 16-byte aligned");
  if (M == 0) return;
  static int sms = [] {
    int dev = 0, n = 0;
    DK_CUDA(cudaGetDevice(&dev));
    DK_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  int dev = 0;
  DK_CUDA(cudaGetDevice(&dev));
  auto* y = static_cast<__nv_bfloat16*>(Y);
  const CUtensorMap tm_x = make_map(X, uint64_t(M), uint64_t(K), ContigTile::kM);
  const CUtensorMap tm_w = make_map(W, uint64_t(E) * N, uint64_t(K), ContigTile::kN);
  if (g_contig_epilogue == 1 && reinterpret_cast<uintptr_t>(Y) % 16 == 0) {
    opt_in_smem<true>(dev);
    launch_pdl(sm90_bf16_grouped_gemm_contiguous_kernel<true>, dim3(sms), dim3(ContigTile::kThreads),
               ContigTile::kSmemBytesStaged, stream, tm_x, tm_w, y, offsets, E, N, K, int(fuse_silu));
  } else {
    opt_in_smem<false>(dev);
    launch_pdl(sm90_bf16_grouped_gemm_contiguous_kernel<false>, dim3(sms), dim3(ContigTile::kThreads),
               ContigTile::kSmemBytes, stream, tm_x, tm_w, y, offsets, E, N, K, int(fuse_silu));
  }
  DK_LAUNCHED();
}

}  // namespace dispatch
