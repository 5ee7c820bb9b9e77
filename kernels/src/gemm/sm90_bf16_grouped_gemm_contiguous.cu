// Host launcher for the TMA + wgmma prefill grouped GEMM: builds the two tensor maps (X as
// [M, K], W as [E*N, K], 128B swizzle) and launches one persistent CTA per multiprocessor.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include "contig_plan.h"
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
// (its MMAs and loads alone, to measure what the epilogue costs). 3 = staged through stmatrix, with TMA stores for
// the 64-row chunks whose rows all belong to the expert; 4 = staged through stmatrix, the threads' copy-out (both
// kernels; the same bits as staged; opt-in: session 21 measured them 1.000x and 1.003x staged). DK_CONTIG_EPILOGUE
// (0, 1, 3 or 4) overrides it per launch; plan_contiguous turns the mode into the launch's epilogue.
int g_contig_epilogue = 1;
// The three switches below (mode 0 off, 1 on, 2 auto) feed plan_contiguous (contig_plan.h, where the rules and their
// measurements are); DK_CONTIG_HALF_TAILS, DK_CONTIG_PINGPONG (0 / 1) and DK_CONTIG_DYNAMIC (0) override them, read
// per launch like the kernels' other A/B switches.
// Half tails: an expert's last row tile of at most 64 rows as a 64-row tile (sm90_bf16_grouped_gemm_contiguous.cuh).
int g_contig_half_tails = 2;
// Dynamic tile schedule: tiles from an atomic counter (1) or the static stride over the grid (0).
int g_contig_dynamic = 1;
// Ping-pong: each consumer warpgroup on its own 128 x 128 tiles (sm90_bf16_grouped_gemm_contiguous_pingpong.cuh).
int g_contig_pingpong = 2;
// Pairs: the ping-pong kernel in 2-CTA clusters that multicast the token tile (the .cuh says how).
int g_contig_pairs = 2;
// Swapped tails: the cooperative kernel runs an expert's tail of <= 32 rows with the weights as the MMA's M side
// (the .cuh says how); DK_CONTIG_SWAP_TAILS (0 / 1) overrides it.
int g_contig_swap_tails = 2;

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

// a switch's mode: the environment's 0 / 1 where set, else the global's
int switch_mode(const char* env, int global) {
  const char* v = std::getenv(env);
  return v && (v[0] == '0' || v[0] == '1') ? v[0] - '0' : global;
}

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
  ContigPlanInputs in;
  in.M = M, in.E = E, in.K = K, in.N = N;
  in.half_tails = switch_mode("DK_CONTIG_HALF_TAILS", g_contig_half_tails);
  in.pingpong = switch_mode("DK_CONTIG_PINGPONG", g_contig_pingpong);
  in.dynamic = switch_mode("DK_CONTIG_DYNAMIC", g_contig_dynamic) != 0;
  in.pairs = switch_mode("DK_CONTIG_PAIRS", g_contig_pairs);
  in.swap_tails = switch_mode("DK_CONTIG_SWAP_TAILS", g_contig_swap_tails);
  const int env_epilogue = epilogue_from_env(std::getenv("DK_CONTIG_EPILOGUE"));
  in.epilogue = env_epilogue >= 0 ? env_epilogue : g_contig_epilogue;
  in.aligned = reinterpret_cast<uintptr_t>(Y) % 16 == 0;
  const ContigPlan plan = plan_contiguous(in);
  // the staged epilogue's flags (the kernels' epi_flags): bit 0 TMA stores, bit 1 stmatrix
  const int epi_flags = (plan.tma_stores ? 1 : 0) | (plan.stmatrix ? 2 : 0);
  const CUtensorMap tm_x = make_map(X, uint64_t(M), uint64_t(K), ContigTile::kM);
  const CUtensorMap tm_w = make_map(W, uint64_t(E) * N, uint64_t(K), ContigTile::kN);
  // Y for the epilogue's TMA stores: [M, ld] in 64 x 64 boxes, the staging buffer's 128B swizzle (unused without
  // them: the kernels take a map either way, X's then)
  const int ld = fuse_silu ? N / 2 : N;
  const CUtensorMap tm_y =
      plan.tma_stores ? make_tensor_map_2d(Y, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, uint64_t(M), uint64_t(ld), kEpiCols, 64)
                      : tm_x;
  int* sched = plan.dynamic ? next_sched_slot() : nullptr;
  const int half_tails = plan.half_tails ? 1 : 0;
  if (plan.pingpong) {
    const CUtensorMap tm_w128 = make_map(W, uint64_t(E) * N, uint64_t(K), PingPongTile::kN);
    if (plan.pairs) {
      constexpr auto kernel = sm90_bf16_grouped_gemm_pingpong_kernel<2>;
      const CUtensorMap tm_x64 = make_map(X, uint64_t(M), uint64_t(K), PingPongTile::kM / 2);
      opt_in_smem_once<kernel>(PingPongTile::kSmemBytes);
      const int clusters = max_active_clusters_once<kernel>(2, PingPongTile::kThreads, PingPongTile::kSmemBytes);
      static std::atomic<bool> logged{false};
      if (std::getenv("DK_CONTIG_LOG") && !logged.exchange(true))
        std::fprintf(stderr, "[dk] contiguous ping-pong pairs: %d clusters of 2 fit, grid %d CTAs, %s schedule\n",
                     clusters, 2 * clusters, sched ? "dynamic" : "static");
      launch_pdl_cluster(kernel, dim3(2 * clusters), dim3(PingPongTile::kThreads), PingPongTile::kSmemBytes, 2,
                         stream, tm_x64, tm_w128, tm_y, y, offsets, E, N, K, int(fuse_silu), half_tails, sched,
                         epi_flags);
    } else {
      constexpr auto kernel = sm90_bf16_grouped_gemm_pingpong_kernel<1>;
      opt_in_smem_once<kernel>(PingPongTile::kSmemBytes);
      launch_pdl(kernel, dim3(sms), dim3(PingPongTile::kThreads), PingPongTile::kSmemBytes, stream, tm_x, tm_w128,
                 tm_y, y, offsets, E, N, K, int(fuse_silu), half_tails, sched, epi_flags);
    }
    DK_LAUNCHED();
    return;
  }
  if (!plan.write) y = nullptr;  // benchmark only: no epilogue at all (what the stores cost)
  if (plan.swap_tails) {
    constexpr auto kernel = sm90_bf16_grouped_gemm_contiguous_kernel<true, true>;
    const CUtensorMap tm_xt = make_map(X, uint64_t(M), uint64_t(K), ContigSwapTile::kTailRows);
    opt_in_smem_once<kernel>(ContigSwapTile::kSmemBytesStaged);
    launch_pdl(kernel, dim3(sms), dim3(ContigTile::kThreads), ContigSwapTile::kSmemBytesStaged, stream, tm_x, tm_w,
               tm_y, tm_xt, y, offsets, E, N, K, int(fuse_silu), half_tails, sched, epi_flags);
  } else if (plan.staged || !plan.write) {
    opt_in_smem_once<sm90_bf16_grouped_gemm_contiguous_kernel<true>>(ContigTile::kSmemBytesStaged);
    launch_pdl(sm90_bf16_grouped_gemm_contiguous_kernel<true>, dim3(sms), dim3(ContigTile::kThreads),
               ContigTile::kSmemBytesStaged, stream, tm_x, tm_w, tm_y, tm_x, y, offsets, E, N, K, int(fuse_silu), half_tails,
               sched, epi_flags);
  } else {
    opt_in_smem_once<sm90_bf16_grouped_gemm_contiguous_kernel<false>>(ContigTile::kSmemBytes);
    launch_pdl(sm90_bf16_grouped_gemm_contiguous_kernel<false>, dim3(sms), dim3(ContigTile::kThreads),
               ContigTile::kSmemBytes, stream, tm_x, tm_w, tm_y, tm_x, y, offsets, E, N, K, int(fuse_silu), half_tails, sched,
               0);
  }
  DK_LAUNCHED();
}

}  // namespace dispatch
