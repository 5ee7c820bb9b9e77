// Host launcher for the TMA + wgmma prefill grouped GEMM: builds the two tensor maps (X as
// [M, K], W as [E*N, K], 128B swizzle) and launches one persistent CTA per multiprocessor.
#include <atomic>
#include <cstdlib>
#include "grouped_gemm.h"
#include "sm90_bf16_grouped_gemm_contiguous.cuh"
#include "sm90_bf16_grouped_gemm_contiguous_pingpong.cuh"
#include "../common/check.h"
#include "../common/launch.h"
#include "../common/tensor_map.h"

namespace dispatch {

// Prefill epilogue: 0 = direct (4-byte stores from the registers), 1 = staged (shared memory, 16-byte
// row stores; the default since the H200 run of 2026-11-29 20:19 UTC; needs Y 16-byte aligned, else
// the launch takes direct). Same output bits either way. 2 = benchmark only: the kernel writes nothing
// (its MMAs and loads alone, to measure what the epilogue costs).
int g_contig_epilogue = 1;
// Half tails (sm90_bf16_grouped_gemm_contiguous.cuh): 0 = every row tile is 128 rows, 1 = an expert's last row tile
// of at most 64 rows runs as a 64-row tile, 2 = auto (the default): 1 except where a weight tile is large (K > 4096,
// 256 x K bf16 > 2 MiB) and the experts average fewer than 256 rows (the GEMM reads weights about as fast as HBM gives
// them). There a half tile runs through K twice as fast as the whole tile beside it on the same weight tile, so the
// whole one reads the second half of that tile long after the half one pulled it into L2, and on the H200 it came
// from HBM again (2026-12-02, docs/kernels.md "Session 17": DeepSeek-V3 gate_up at 4,096 tokens 0.92x, every other
// row 0.98-1.15x). DK_CONTIG_HALF_TAILS=0 / 1 in the environment overrides it, read per launch.
int g_contig_half_tails = 2;
// Dynamic tile schedule (sm90_bf16_grouped_gemm_contiguous.cuh): 1 = tiles from an atomic counter (the default), 0 =
// static (blockIdx.x, +gridDim.x, ...); DK_CONTIG_DYNAMIC=0 turns it off too, per launch.
int g_contig_dynamic = 1;
// Ping-pong schedule (sm90_bf16_grouped_gemm_contiguous_pingpong.cuh): 1 = each consumer warpgroup on its own 128 x 128
// tiles, alternating, with the staged epilogue (no half tails, static schedule); 0 = the cooperative kernel; 2 = auto
// (the default): ping-pong where K <= 1536. A short K leaves few k-blocks per tile, so the epilogue the ping-pong
// hides is a large share; with a long K it is a small one, and the ping-pong's 128-wide weight tiles (a third more
// L2 -> shared-memory traffic per MMA than 256-wide ones) cost more than it hides. H200, 2026-12-02 22:31 UTC
// (docs/kernels.md "Session 17"): the down projections of OLMoE, Qwen3-30B-A3B and deepseek-moe-16b (K = 768-1408)
// 1.00-1.10x at 4,096 and 16,384 tokens; K = 2048 0.92-1.03x; Mixtral (K = 4096, 14336) down to 0.69x.
// DK_CONTIG_PINGPONG=0 / 1 overrides it, read per launch.
int g_contig_pingpong = 2;

namespace {

// Scheduler slots of the dynamic schedule: two ints each (next tile, finished CTAs), zero between launches (each
// launch's last CTA zeroes its own). A launch takes the next slot round-robin on the host, so launches that may run
// at the same time (on other streams, or a PDL successor) use different slots unless kSchedSlots launches are in
// flight at once; a captured graph keeps its launches' slots.
constexpr int kSchedSlots = 256;
__device__ int g_sched_slots[kSchedSlots][2];

int* next_sched_slot() {
  constexpr int kMaxDevices = 64;
  static std::atomic<unsigned> seq{0};
  static std::atomic<int*> base[kMaxDevices] = {};  // the slots' address on each device (one module per device)
  int dev = 0;
  DK_CUDA(cudaGetDevice(&dev));
  DK_CHECK(dev >= 0 && dev < kMaxDevices, "device index out of range");
  int* b = base[dev].load();
  if (b == nullptr) {
    void* p = nullptr;
    DK_CUDA(cudaGetSymbolAddress(&p, g_sched_slots));
    b = static_cast<int*>(p);
    base[dev].store(b);
  }
  return b + 2 * (seq++ % kSchedSlots);
}

int contig_half_tails_auto(int M, int E, int K) { return K <= 4096 || int64_t(M) >= int64_t(256) * E ? 1 : 0; }

CUtensorMap make_map(const void* base, uint64_t rows, uint64_t k, uint32_t box_rows) {
  return make_tensor_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rows, k, ContigTile::kK, box_rows);
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
  auto* y = static_cast<__nv_bfloat16*>(Y);
  const char* half_env = std::getenv("DK_CONTIG_HALF_TAILS");
  const int half_mode = half_env && (half_env[0] == '0' || half_env[0] == '1') ? half_env[0] - '0' : g_contig_half_tails;
  const int half_tails = half_mode == 2 ? contig_half_tails_auto(M, E, K) : half_mode != 0;
  const char* dyn_env = std::getenv("DK_CONTIG_DYNAMIC");
  int* sched = g_contig_dynamic != 0 && !(dyn_env && dyn_env[0] == '0') ? next_sched_slot() : nullptr;
  const CUtensorMap tm_x = make_map(X, uint64_t(M), uint64_t(K), ContigTile::kM);
  const CUtensorMap tm_w = make_map(W, uint64_t(E) * N, uint64_t(K), ContigTile::kN);
  const char* pp_env = std::getenv("DK_CONTIG_PINGPONG");
  const int pp_mode = pp_env && (pp_env[0] == '0' || pp_env[0] == '1') ? pp_env[0] - '0' : g_contig_pingpong;
  const bool pingpong = (pp_mode == 2 ? K <= 1536 : pp_mode != 0) && g_contig_epilogue == 1 &&
                        reinterpret_cast<uintptr_t>(Y) % 16 == 0;
  if (pingpong) {
    const CUtensorMap tm_w128 = make_map(W, uint64_t(E) * N, uint64_t(K), PingPongTile::kN);
    opt_in_smem_once<sm90_bf16_grouped_gemm_pingpong_kernel>(PingPongTile::kSmemBytes);
    launch_pdl(sm90_bf16_grouped_gemm_pingpong_kernel, dim3(sms), dim3(PingPongTile::kThreads),
               PingPongTile::kSmemBytes, stream, tm_x, tm_w128, y, offsets, E, N, K, int(fuse_silu));
    DK_LAUNCHED();
    return;
  }
  if (g_contig_epilogue == 2) y = nullptr;  // benchmark only: no epilogue at all (what the stores cost)
  if (g_contig_epilogue >= 1 && reinterpret_cast<uintptr_t>(Y) % 16 == 0) {
    opt_in_smem_once<sm90_bf16_grouped_gemm_contiguous_kernel<true>>(ContigTile::kSmemBytesStaged);
    launch_pdl(sm90_bf16_grouped_gemm_contiguous_kernel<true>, dim3(sms), dim3(ContigTile::kThreads),
               ContigTile::kSmemBytesStaged, stream, tm_x, tm_w, y, offsets, E, N, K, int(fuse_silu), half_tails, sched);
  } else {
    opt_in_smem_once<sm90_bf16_grouped_gemm_contiguous_kernel<false>>(ContigTile::kSmemBytes);
    launch_pdl(sm90_bf16_grouped_gemm_contiguous_kernel<false>, dim3(sms), dim3(ContigTile::kThreads),
               ContigTile::kSmemBytes, stream, tm_x, tm_w, y, offsets, E, N, K, int(fuse_silu), half_tails, sched);
  }
  DK_LAUNCHED();
}

}  // namespace dispatch
