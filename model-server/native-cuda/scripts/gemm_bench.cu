// Timing harness for the dense GEMM paths (src/gemm.cu, src/gemm_mma.cuh) on the GPU machine;
// gemm-bench.sh builds and runs it. For each shape (K, N) and T it checks every path against a
// simple reference kernel (fp32 accumulation, one thread per output, on the same bf16 inputs)
// with a random bias, plain and accumulating, then times it with the weight rotated over
// copies that together exceed the L2 (so every launch streams W from HBM, as 48 layers do).
// Bound: |got - ref| <= 1e-3 * (sum_k |x w| + |bias| + |y0|) + 1e-6 per element.
// Prints one row per (shape, T, path, K split): median us over the timed launches (one launch
// between two events, so the host's launch latency counts too; a split path's memset of Y
// counts), GB/s (W + X read, Y written, once each), TFLOP/s (2 T K N) and the worst error over
// the bound of that path's two checks; at T <= 64 also graph_us, the mean per launch of a CUDA
// graph of 20 launches on 20 rotated copies of W (the model's decode case: every layer's weights
// are new, no host in the way), pdl_us the same graph with Programmatic Dependent Launch (each
// launch may start while the previous one drains, as in the model's step), and W_TB/s = W's bytes
// / pdl_us (4.3 TB/s is the H200's HBM as a device copy measures it). A "# skinny2" line before
// each (shape, T) says what GemmPath::Skinny2 launches. Exit status 1 on any mismatch, 2 on a
// CUDA error.
//
//   gemm_bench [--quick] [--skip-edges] [--t LIST]  (LIST: comma-separated T values; default
//   1,8,16,32,64,512,8192; --quick: no per-row check lines, no K-split sweep)
//   gemm_bench --splitk: only the split-K section (splitk_section below): determinism, graph
//   replay, and the deterministic reduction timed against the earlier atomics.
//   gemm_bench --decode: the split-K section's T <= 64 part only (every decode path, forced and
//   automatic splits, 5-run bit identity, the Skinny2 graph checks), then exits.
//   gemm_bench --prefill-check: GemmPath::Wgmma's (gemm_wgmma_tiled.cuh) first launches captured
//   in a CUDA graph (replays vs eager vs reference), then Auto, Tiled and Wgmma (its own tile
//   width, then 128 and 256 forced) at the split-K section's T > 64 cases plus T = 1100 (q|k|v),
//   2048 (o), 4100 (ragged): reference and 5-run bit identity; then exits.
//   gemm_bench --prefill [--skip-edges] [--t LIST]: the T > 64 edge shapes (every acc x bias),
//   then q|k|v, o and the LM head at T = 512, 2048, 8192 (or LIST), tiled against wgmma (auto,
//   128, 256 wide) side by side; implies --quick.
#include "gemm_bench.cuh"

namespace dcuda {
// gemm.cu's PDL and fused-kernel switches live in fused_ops.cu with the model's kernels; the
// harness launches on stream 0 (launch_k never sets PDL there) and runs the current kernels.
bool legacy_kernels() { return false; }
// off except while the pdl_us graphs are captured (launches on stream 0 never take PDL anyway)
bool g_bench_pdl = false;
bool pdl_enabled() { return g_bench_pdl; }
}  // namespace dcuda

using namespace gemm_bench;

int main(int argc, char** argv) {
  std::vector<int> Ts = {1, 8, 16, 32, 64, 512, 8192};
  bool quick = false, edges_on = true, splitk = false, decode = false, prefill = false, prefill_check = false,
       ts_given = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--splitk")) splitk = true;
    else if (!std::strcmp(argv[i], "--decode")) decode = true;
    else if (!std::strcmp(argv[i], "--prefill")) prefill = true;
    else if (!std::strcmp(argv[i], "--prefill-check")) prefill_check = true;
    else if (!std::strcmp(argv[i], "--skip-edges")) edges_on = false;
    else if (!std::strcmp(argv[i], "--t") && i + 1 < argc) {
      Ts.clear();
      ts_given = true;
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) Ts.push_back(std::atoi(tok));
    } else {
      std::fprintf(stderr,
                   "usage: gemm_bench [--quick] [--skip-edges] [--prefill] [--t 1,8,16] | --splitk | --decode | "
                   "--prefill-check\n");
      return 2;
    }
  }
  std::vector<Shape> shapes = {
      {"qkv", 2048, 5120}, {"o_proj", 4096, 2048}, {"gate_up", 2048, 6144}, {"down", 6144, 2048},
      {"k4096n5120", 4096, 5120}, {"lm_head", 2048, 151936},
  };
  if (prefill) {  // tiled against wgmma at prefill sizes: the projections and the LM head
    shapes = {{"qkv", 2048, 5120}, {"o_proj", 4096, 2048}, {"lm_head", 2048, 151936}};
    if (!ts_given) Ts = {512, 2048, 8192};
    quick = true;
  }
  // correctness-only edge shapes: ragged T and N, K tails (K % 8 == 0 but not a tile multiple),
  // odd N (scalar epilogue), K % 8 != 0 (falls back to the legacy tiles)
  const std::vector<std::pair<int, Shape>> edges = {
      {9, {"edge", 200, 130}},   {17, {"edge", 1032, 261}}, {33, {"edge", 4104, 300}},
      {64, {"edge", 136, 8}},    {65, {"edge", 136, 130}},  {200, {"edge", 1000, 390}},
      {300, {"edge", 2056, 257}}, {129, {"edge", 44, 70}},  {40, {"edge", 36, 70}},
  };
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  if (splitk || decode || prefill_check) {
    const int f = splitk_section(prop, decode ? Section::Decode : prefill_check ? Section::Prefill : Section::All);
    std::printf("\n%s: %d split-K mismatches\n", f ? "FAIL" : "PASS", f);
    return f ? 1 : 0;
  }
  int failures = 0;

  // returns worst error / bound (> 1 is a failure)
  auto check = [&](GemmPath path, int T, int K, int N, const bf16* X, const bf16* W, const float* bias, bool acc,
                   float* Y, const float* y0, float* ref, float* mag) -> double {
    const size_t ny = size_t(T) * N;
    reference<<<dim3((N + 31) / 32, (T + 31) / 32), dim3(32, 32)>>>(X, T, K, W, N, bias, acc ? y0 : nullptr, ref, mag);
    CK(cudaGetLastError());
    if (acc) CK(cudaMemcpy(Y, y0, ny * 4, cudaMemcpyDeviceToDevice));
    else CK(cudaMemset(Y, 0xff, ny * 4));  // NaN: a missed store shows
    dcuda::gemm_path(path, 0, X, T, K, W, N, bias, Y, acc, 0);
    CK(cudaDeviceSynchronize());
    std::vector<float> g(ny), r(ny), m(ny);
    CK(cudaMemcpy(g.data(), Y, ny * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r.data(), ref, ny * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(m.data(), mag, ny * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < ny; ++i) {
      const double e = std::fabs(double(g[i]) - r[i]) / (1e-3 * m[i]);
      worst = std::isfinite(e) ? std::max(worst, e) : 1e30;
    }
    return worst;
  };

  auto paths_for = [prefill](int T) {
    std::vector<GemmPath> p;
    if (prefill && T > 64) return std::vector<GemmPath>{GemmPath::Tiled, GemmPath::Wgmma};
    if (T <= 8) p.push_back(GemmPath::Auto), p.push_back(GemmPath::Gemv);  // Auto: gemv_fast where it applies
    p.push_back(GemmPath::Legacy);
    if (T <= 64) {
      p.push_back(GemmPath::Skinny), p.push_back(GemmPath::SkinnyAsync), p.push_back(GemmPath::Stream);
      p.push_back(GemmPath::Skinny2);
    }
    p.push_back(GemmPath::Tiled);
    if (T > 64) p.push_back(GemmPath::TiledWide), p.push_back(GemmPath::Wgmma);
    return p;
  };

  // ---- edge shapes: correctness only
  for (const auto& [T, sh] : edges) {
    if (!edges_on) break;
    if (prefill && T <= 64) continue;  // --prefill: the T > 64 edges only
    const int K = sh.K, N = sh.N;
    bf16 *X, *W;
    float *bias, *Y, *y0, *ref, *mag;
    CK(cudaMalloc(&X, size_t(T) * K * 2));
    CK(cudaMalloc(&W, size_t(N) * K * 2));
    CK(cudaMalloc(&bias, N * 4));
    for (float** p : {&Y, &y0, &ref, &mag}) CK(cudaMalloc(p, size_t(T) * N * 4));
    fill_bf16<<<grid_for(size_t(T) * K), 256>>>(X, size_t(T) * K, 11u + T, 2.f);
    fill_bf16<<<grid_for(size_t(N) * K), 256>>>(W, size_t(N) * K, 13u + N, 2.f);
    fill_f32<<<grid_for(N), 256>>>(bias, N, 5u);
    fill_f32<<<grid_for(size_t(T) * N), 256>>>(y0, size_t(T) * N, 7u);
    for (GemmPath p : paths_for(T))
      for (int acc = 0; acc < 2; ++acc)
        for (int b = 0; b < 2; ++b) {
          const double w = check(p, T, K, N, X, W, b ? bias : nullptr, acc, Y, y0, ref, mag);
          const bool bad = w > 1.0;
          failures += bad;
          if (bad || !quick)
            std::printf("check T=%d K=%d N=%d %-8s acc=%d bias=%d: worst/bound %.3g%s\n", T, K, N, name(p), acc, b, w,
                        bad ? "  MISMATCH" : "");
        }
    for (void* p : {(void*)X, (void*)W, (void*)bias, (void*)Y, (void*)y0, (void*)ref, (void*)mag}) CK(cudaFree(p));
  }

  // ---- model shapes: correctness, then timing
  cudaStream_t gs;  // the graph timings' stream (stream 0 cannot be captured)
  CK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
  std::printf("\n%-10s %6s %6s %7s %-8s %6s %10s %9s %9s %9s %9s %9s %7s\n", "shape", "K", "N", "T", "path", "splits",
              "us", "GB/s", "TFLOP/s", "err/bound", "graph_us", "pdl_us", "W_TB/s");
  for (const Shape& sh : shapes) {
    const int K = sh.K, N = sh.N;
    const size_t wbytes = size_t(N) * K * 2;
    const int copies = int(std::max<size_t>(1, (size_t(prop.l2CacheSize) * 4 + wbytes - 1) / wbytes));
    const int Tmax = *std::max_element(Ts.begin(), Ts.end());
    const bool huge = size_t(Tmax) * N > size_t(1) << 28;
    std::vector<bf16*> Ws(copies);
    for (int c = 0; c < copies; ++c) CK(cudaMalloc(&Ws[c], wbytes));
    fill_bf16<<<grid_for(wbytes / 2), 256>>>(Ws[0], wbytes / 2, 17u + N + K, 2.f);
    for (int c = 1; c < copies; ++c) CK(cudaMemcpy(Ws[c], Ws[0], wbytes, cudaMemcpyDeviceToDevice));
    for (int T : Ts) {
      // the LM head at prefill length: 1.2 G outputs (--prefill: up to T = 2048, 0.3 G)
      if (T < 1 || (huge && T > (prefill ? 2048 : 512))) continue;
      const size_t nx = size_t(T) * K, ny = size_t(T) * N;
      bf16* X;
      float *bias, *Y, *y0, *ref, *mag;
      CK(cudaMalloc(&X, nx * 2));
      CK(cudaMalloc(&bias, N * 4));
      for (float** p : {&Y, &y0, &ref, &mag}) CK(cudaMalloc(p, ny * 4));
      fill_bf16<<<grid_for(nx), 256>>>(X, nx, 19u + T, 2.f);
      fill_f32<<<grid_for(N), 256>>>(bias, N, 23u);
      fill_f32<<<grid_for(ny), 256>>>(y0, ny, 29u);
      if (T <= 64) {
        int cl = 0, per_sm = 0, clusters = 0, sp2 = 0, ctas2 = 0, st2 = 0, smem2 = 0;
        dcuda::gemm_stream_info(T, K, N, &cl, &per_sm, &clusters);
        dcuda::gemm_skinny2_info(T, K, N, &sp2, &ctas2, &st2, &smem2);
        std::printf("# %s T=%d: stream %d x %d CTAs (cluster %d), %d CTAs/SM, %d clusters resident; skinny2 %d CTAs "
                    "(%d K splits = cluster), %d stages, %d B shared memory\n",
                    sh.what, T, (N + 127) / 128, cl, cl, per_sm, clusters, ctas2, sp2, st2, smem2);
      } else {
        int bn = 0, tiles = 0, ctas = 0, st = 0, smem = 0;
        dcuda::gemm_wgmma_info(T, K, N, 0, &bn, &tiles, &ctas, &st, &smem);
        std::printf("# %s T=%d: wgmma 128x%d tiles, %d tiles on %d persistent CTAs, %d stages, %d B shared memory\n",
                    sh.what, T, bn, tiles, ctas, st, smem);
      }
      // per launch: the mean over 5 replays of a CUDA graph of 20 launches on rotated copies of W
      // (pdl: launched with Programmatic Dependent Launch); -1 when the capture failed
      auto graph_us = [&](GemmPath p, int sp, bool pdl) -> double {
        dcuda::g_bench_pdl = pdl;
        // one eager launch on gs first: a split path's workspace for gs is allocated outside the capture
        dcuda::gemm_path(p, sp, X, T, K, Ws[0], N, nullptr, Y, false, gs);
        CK(cudaStreamSynchronize(gs));
        cudaGraph_t g = nullptr;
        CK(cudaStreamBeginCapture(gs, cudaStreamCaptureModeThreadLocal));
        bool ok = true;
        try {
          for (int i = 0; i < 20; ++i) dcuda::gemm_path(p, sp, X, T, K, Ws[i % copies], N, nullptr, Y, false, gs);
        } catch (const std::exception& e) {
          ok = false;
          std::printf("graph capture %s %s T=%d: %s\n", sh.what, name(p), T, e.what());
        }
        const cudaError_t ce = cudaStreamEndCapture(gs, &g);
        dcuda::g_bench_pdl = false;
        if (!ok || ce != cudaSuccess) {
          if (g) cudaGraphDestroy(g);
          cudaGetLastError();
          return -1;
        }
        cudaGraphExec_t ge;
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, gs));  // warm-up
        CK(cudaStreamSynchronize(gs));
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        const int reps = 5;
        CK(cudaEventRecord(e0, gs));
        for (int r = 0; r < reps; ++r) CK(cudaGraphLaunch(ge, gs));
        CK(cudaEventRecord(e1, gs));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
        return ms * 1e3 / (reps * 20);
      };
      for (GemmPath p : paths_for(T)) {
        // correctness: plain store with bias, and accumulate without (the model's two uses)
        double worst = 0;
        for (int acc = 0; acc < 2; ++acc) {
          const double w = check(p, T, K, N, X, Ws[0], acc ? nullptr : bias, acc, Y, y0, ref, mag);
          worst = std::max(worst, w);
          if (w > 1.0) {
            ++failures;
            std::printf("check %s T=%d %s acc=%d: worst/bound %.3g  MISMATCH\n", sh.what, T, name(p), acc, w);
          }
        }
        const bool slow = p == GemmPath::Gemv && T > 8;
        if (slow) continue;
        std::vector<int> splits = {0};
        if (!quick && (p == GemmPath::Skinny || p == GemmPath::SkinnyAsync || p == GemmPath::Tiled) &&
            (T == 16 || T == 64 || T == 512))
          splits = {0, 1, 2, 4, 8, 16};
        if (!quick && p == GemmPath::Stream && (T == 16 || T == 64)) splits = {0, 1, 2, 4, 8};  // cluster sizes
        if (!quick && p == GemmPath::Skinny2 && (T == 16 || T == 64)) splits = {0, 1, 2, 3, 4, 6, 8};
        if (p == GemmPath::Wgmma && (prefill || !quick)) splits = {0, 128, 256};  // auto, then each tile width
        for (int sp : splits) {
          const int iters = T >= 4096 ? 10 : 50;
          const double us = median_launch_us(iters, [&](int it) {
            dcuda::gemm_path(p, sp, X, T, K, Ws[(it + 3) % copies], N, nullptr, Y, false, 0);
          });
          const double bytes = double(wbytes) + double(nx) * 2 + double(ny) * 4;
          char graph_cols[64] = "        -         -       -";
          if (T <= 64) {
            const double g_us = graph_us(p, sp, false), p_us = graph_us(p, sp, true);
            failures += g_us < 0 || p_us < 0;
            std::snprintf(graph_cols, sizeof graph_cols, "%9.2f %9.2f %7.2f", g_us, p_us,
                          p_us > 0 ? double(wbytes) / p_us * 1e-6 : 0.0);
          }
          std::printf("%-10s %6d %6d %7d %-8s %6s %10.1f %9.0f %9.1f %9.2g %s\n", sh.what, K, N, T, name(p),
                      sp ? std::to_string(sp).c_str() : "auto", us, bytes / us * 1e-3,
                      2.0 * T * K * double(N) / us * 1e-6, worst, graph_cols);
        }
      }
      for (void* q : {(void*)X, (void*)bias, (void*)Y, (void*)y0, (void*)ref, (void*)mag}) CK(cudaFree(q));
    }
    for (bf16* w : Ws) CK(cudaFree(w));
    std::fflush(stdout);
  }
  CK(cudaStreamDestroy(gs));
  std::printf("\n%s: %d mismatches\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
