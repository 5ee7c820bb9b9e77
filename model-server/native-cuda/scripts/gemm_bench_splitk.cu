// The dense GEMM harness's split-K section (gemm_bench --splitk / --decode / --prefill-check; see
// gemm_bench.cu for the harness).
#include "gemm_bench.cuh"

namespace gemm_bench {

// ---- split K (gemm_splitk.cuh) -----------------------------------------------------------------
// 0. GemmPath::Skinny2's first launches in the process are made inside a CUDA graph capture (its
//    shared-memory opt-in, cluster occupancy queries and tensor maps must all be legal there;
//    nothing is allocated), the graph is replayed 3 times from the same Y, and every replay must
//    give the bits of an eager launch, which must match the reference: one cluster launch (T 64,
//    K 2056, N 261: 3 tiles x 8 K splits), one persistent launch (T 7, K 136, N 20000: 157 tiles
//    walked by min(157, SMs) CTAs, ragged k).
// 1. Each split-K path (Skinny, SkinnyAsync and Tiled, TiledWide with 2..8 forced splits; Stream
//    and Skinny2 with 1..8 forced cluster sizes and their own; Legacy and Auto with their own) at
//    ragged shapes and the model's: against the reference (bias on plain stores, y0 when
//    accumulating), then the same launch 5 times from the same Y: identical bits. 2. A CUDA graph
//    of an accumulating 4-split launch replayed 3 times on a fresh Y each time: the eager bits each
//    time (a counter not back at 0 would leave Y unfinished), and a capture that would need the
//    workspace to grow is refused with a message. 3. Auto at the prefill shapes, the atomic split
//    (gemm_set_atomic_splitk(1)) against the new one: median us each, W rotated past the L2; the
//    new one checked and repeated for identical bits too. decode_only (--decode): 0 and the
//    T <= 64 cases of 1.

int splitk_section(const cudaDeviceProp& prop, Section mode) {
  const bool decode_only = mode == Section::Decode, prefill_only = mode == Section::Prefill;
  int failures = 0;
  struct Buf {
    bf16 *X = nullptr, *W = nullptr;
    float *bias = nullptr, *Y = nullptr, *y0 = nullptr, *ref = nullptr, *mag = nullptr;
    int T = 0, K = 0, N = 0;
    void alloc(int t, int k, int n) {
      T = t, K = k, N = n;
      CK(cudaMalloc(&X, size_t(T) * K * 2));
      CK(cudaMalloc(&W, size_t(N) * K * 2));
      CK(cudaMalloc(&bias, size_t(N) * 4));
      for (float** p : {&Y, &y0, &ref, &mag}) CK(cudaMalloc(p, size_t(T) * N * 4));
      fill_bf16<<<grid_for(size_t(T) * K), 256>>>(X, size_t(T) * K, 31u + T, 2.f);
      fill_bf16<<<grid_for(size_t(N) * K), 256>>>(W, size_t(N) * K, 37u + N + K, 2.f);
      fill_f32<<<grid_for(N), 256>>>(bias, N, 41u);
      fill_f32<<<grid_for(size_t(T) * N), 256>>>(y0, size_t(T) * N, 43u);
      CK(cudaGetLastError());
    }
    void release() {
      for (void* p : {(void*)X, (void*)W, (void*)bias, (void*)Y, (void*)y0, (void*)ref, (void*)mag}) CK(cudaFree(p));
    }
    size_t ny() const { return size_t(T) * N; }
    // Y from y0 (acc) or NaN, then one launch on s
    void run(GemmPath p, int sp, bool acc, bool with_bias, cudaStream_t s) {
      if (acc) CK(cudaMemcpyAsync(Y, y0, ny() * 4, cudaMemcpyDeviceToDevice, s));
      else CK(cudaMemsetAsync(Y, 0xff, ny() * 4, s));
      dcuda::gemm_path(p, sp, X, T, K, W, N, with_bias ? bias : nullptr, Y, acc, s);
    }
    std::vector<float> host() const {
      std::vector<float> h(ny());
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h.data(), Y, ny() * 4, cudaMemcpyDeviceToHost));
      return h;
    }
    double worst_vs_ref(bool acc, bool with_bias) {
      reference<<<dim3((N + 31) / 32, (T + 31) / 32), dim3(32, 32)>>>(X, T, K, W, N, with_bias ? bias : nullptr,
                                                                       acc ? y0 : nullptr, ref, mag);
      CK(cudaGetLastError());
      const std::vector<float> g = host();
      std::vector<float> r(ny()), m(ny());
      CK(cudaMemcpy(r.data(), ref, ny() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(m.data(), mag, ny() * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (size_t i = 0; i < ny(); ++i) {
        const double e = std::fabs(double(g[i]) - r[i]) / (1e-3 * m[i]);
        worst = std::isfinite(e) ? std::max(worst, e) : 1e30;
      }
      return worst;
    }
  };
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  };
  // worst/bound and whether 5 launches gave one result
  auto check_path = [&](Buf& b, GemmPath p, int sp, bool acc, const char* tag) {
    const bool with_bias = !acc || b.T % 2 == 1;  // accumulate with bias too at odd T
    try {
      b.run(p, sp, acc, with_bias, 0);
    } catch (const std::exception& e) {  // a refused launch (e.g. a cluster shape) is a failure, not the end
      ++failures;
      cudaGetLastError();
      std::printf("splitk %-6s T=%4d K=%5d N=%5d %-8s splits=%-4s acc=%d: launch failed: %s  MISMATCH\n", tag, b.T, b.K,
                  b.N, name(p), sp ? std::to_string(sp).c_str() : "auto", acc, e.what());
      return;
    }
    const double w = b.worst_vs_ref(acc, with_bias);
    b.run(p, sp, acc, with_bias, 0);
    const std::vector<float> first = b.host();
    int differ = 0;
    for (int r = 1; r < 5; ++r) {
      b.run(p, sp, acc, with_bias, 0);
      differ += !same_bits(first, b.host());
    }
    const bool bad = w > 1.0 || differ;
    failures += bad;
    std::printf("splitk %-6s T=%4d K=%5d N=%5d %-8s splits=%-4s acc=%d bias=%d: worst/bound %.3g, %d of 4 repeats "
                "differ%s\n",
                tag, b.T, b.K, b.N, name(p), sp ? std::to_string(sp).c_str() : "auto", acc, with_bias, w, differ,
                bad ? "  MISMATCH" : "");
  };

  std::printf("== skinny2 / wgmma: first launches captured in a CUDA graph, replays vs eager vs reference\n");
  struct GraphCase {
    GemmPath path;
    int T;
    Shape sh;
  };
  std::vector<GraphCase> graph_cases;
  if (!prefill_only)
    graph_cases = {{GemmPath::Skinny2, 64, {"ragged", 2056, 261}}, {GemmPath::Skinny2, 7, {"wide", 136, 20000}}};
  if (!decode_only)  // odd N (the scalar epilogue) and the q|k|v shape (float2 epilogue, several token tiles)
    graph_cases.insert(graph_cases.end(),
                       {{GemmPath::Wgmma, 300, {"ragged", 2056, 257}}, {GemmPath::Wgmma, 1100, {"qkv", 2048, 5120}}});
  for (const auto& [gpath, T, sh] : graph_cases) {
    Buf b;
    b.alloc(T, sh.K, sh.N);
    CK(cudaDeviceSynchronize());  // the fills ran on stream 0, which cs does not wait for
    cudaStream_t cs;
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    int splits = 0, ctas = 0, stages = 0, smem = 0;
    std::string err;
    cudaGraph_t graph = nullptr;
    CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    try {
      b.run(gpath, 0, true, true, cs);
    } catch (const std::exception& e) {
      err = e.what();
    }
    const cudaError_t ce = cudaStreamEndCapture(cs, &graph);
    if (err.empty() && ce != cudaSuccess) err = cudaGetErrorString(ce);
    cudaGetLastError();
    int differ = 0;
    double w = 0;
    if (err.empty()) {
      cudaGraphExec_t exec = nullptr;
      CK(cudaGraphInstantiate(&exec, graph, 0));
      std::vector<std::vector<float>> replays;
      for (int r = 0; r < 3; ++r) {
        CK(cudaGraphLaunch(exec, cs));
        CK(cudaStreamSynchronize(cs));
        replays.push_back(b.host());
      }
      b.run(gpath, 0, true, true, cs);  // eager, then the reference reads the same Y
      const std::vector<float> eager = b.host();
      for (const auto& r : replays) differ += !same_bits(eager, r);
      w = b.worst_vs_ref(true, true);
      if (gpath == GemmPath::Skinny2) dcuda::gemm_skinny2_info(T, sh.K, sh.N, &splits, &ctas, &stages, &smem);
      else {
        int bn = 0, tiles = 0;
        dcuda::gemm_wgmma_info(T, sh.K, sh.N, 0, &bn, &tiles, &ctas, &stages, &smem);
        splits = 1;
      }
      CK(cudaGraphExecDestroy(exec));
    }
    if (graph) cudaGraphDestroy(graph);
    const bool bad = !err.empty() || differ || w > 1.0;
    failures += bad;
    std::printf("%s graph T=%d K=%d N=%d (%d splits, %d CTAs) acc=1 bias=1: %s%d of 3 replays differ from eager, "
                "worst/bound %.3g%s\n",
                name(gpath), T, sh.K, sh.N, splits, ctas, err.empty() ? "" : ("capture failed: " + err + "; ").c_str(), differ, w,
                bad ? "  MISMATCH" : "");
    CK(cudaStreamDestroy(cs));
    b.release();
  }

  std::printf("== split K: reference and 5-run bit identity (deterministic reduction)\n");
  dcuda::gemm_set_atomic_splitk(0);
  std::vector<std::pair<int, Shape>> cases = {
      {33, {"ragged", 4104, 300}}, {64, {"ragged", 2056, 261}}, {1, {"o_proj", 4096, 2048}},
      {16, {"o_proj", 4096, 2048}}, {64, {"qkv", 2048, 5120}}, {130, {"ragged", 2056, 260}},
      {200, {"ragged", 1000, 390}}, {300, {"ragged", 2056, 257}}, {128, {"o_proj", 4096, 2048}},
      {256, {"down", 10944, 2048}},
  };
  if (prefill_only)  // more token tiles than SMs, persistent walks of several tiles, a ragged last tile
    cases.insert(cases.end(), {{1100, {"qkv", 2048, 5120}}, {2048, {"o_proj", 4096, 2048}},
                               {4100, {"ragged", 2056, 390}}});
  for (const auto& [T, sh] : cases) {
    if (decode_only && T > 64) continue;
    if (prefill_only && T <= 64) continue;
    Buf b;
    b.alloc(T, sh.K, sh.N);
    std::vector<GemmPath> ps = {GemmPath::Auto, GemmPath::Legacy};
    if (prefill_only) ps = {GemmPath::Auto, GemmPath::Tiled, GemmPath::Wgmma};
    else if (T <= 64) ps.insert(ps.end(), {GemmPath::Skinny, GemmPath::SkinnyAsync, GemmPath::Stream, GemmPath::Skinny2});
    else ps.insert(ps.end(), {GemmPath::Tiled, GemmPath::TiledWide, GemmPath::Wgmma});
    for (GemmPath p : ps) {
      const bool forced = p != GemmPath::Auto && p != GemmPath::Legacy;
      const bool cluster = p == GemmPath::Stream || p == GemmPath::Skinny2;  // splits = cluster size, <= 8
      std::vector<int> sps = {0};
      if (p == GemmPath::Wgmma) sps = {0, 128, 256};  // its own tile width, then each forced
      else if (prefill_only) sps = {0};
      else if (cluster) sps = sh.K > 4096 ? std::vector<int>{0, 1, 3, 8} : std::vector<int>{0, 1, 2, 3, 5, 8};
      else if (forced) sps = sh.K > 4096 ? std::vector<int>{3, 8} : std::vector<int>{2, 3, 5, 8};
      for (int sp : sps)
        for (int acc = 0; acc < 2; ++acc) check_path(b, p, sp, acc, sh.what);
    }
    b.release();
  }
  if (decode_only || prefill_only) return failures;

  std::printf("== split K: CUDA graph capture and replay\n");
  {
    Buf b;
    b.alloc(130, 2056, 260);
    cudaStream_t cs;
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    // a fresh stream has no workspace yet: the capture must be refused, not recorded
    bool refused = false;
    CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    try {
      dcuda::gemm_path(GemmPath::Tiled, 4, b.X, b.T, b.K, b.W, b.N, nullptr, b.Y, true, cs);
    } catch (const std::exception& e) {
      refused = true;
      std::printf("capture before the workspace exists: refused (%s)\n", e.what());
    }
    cudaGraph_t g0 = nullptr;
    cudaStreamEndCapture(cs, &g0);
    if (g0) cudaGraphDestroy(g0);
    cudaGetLastError();
    if (!refused) ++failures, std::printf("capture before the workspace exists: not refused  MISMATCH\n");
    b.run(GemmPath::Tiled, 4, true, true, cs);  // eager: allocates the stream's workspace
    const std::vector<float> eager = b.host();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    b.run(GemmPath::Tiled, 4, true, true, cs);
    CK(cudaStreamEndCapture(cs, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    int differ = 0;
    for (int r = 0; r < 3; ++r) {
      CK(cudaGraphLaunch(exec, cs));
      CK(cudaStreamSynchronize(cs));
      differ += !same_bits(eager, b.host());
    }
    const double w = b.worst_vs_ref(true, true);
    const bool bad = differ || w > 1.0;
    failures += bad;
    std::printf("graph replay T=130 K=2056 N=260 tiled splits=4 acc=1: %d of 3 replays differ from eager, worst/bound "
                "%.3g%s\n",
                differ, w, bad ? "  MISMATCH" : "");
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaStreamDestroy(cs));
    b.release();
  }

  std::printf("== split K: atomic (old) vs deterministic (new), Auto path, median us, W rotated past L2\n");
  std::printf("%-8s %6s %6s %5s %3s %10s %10s %7s %9s %s\n", "shape", "K", "N", "T", "acc", "old_us", "new_us",
              "new/old", "err/bnd", "5 runs");
  const std::vector<std::pair<Shape, bool>> prefill = {
      {{"qkv", 2048, 5120}, false}, {{"o_proj", 4096, 2048}, true},
      {{"mlp_gu", 2048, 2 * 10944}, false}, {{"mlp_down", 10944, 2048}, true},
  };
  for (const auto& item : prefill) {
    const Shape sh = item.first;
    const bool acc = item.second;
    const size_t wbytes = size_t(sh.N) * sh.K * 2;
    const int copies = int(std::max<size_t>(1, (size_t(prop.l2CacheSize) * 4 + wbytes - 1) / wbytes));
    for (int T : {128, 256, 512, 1024}) {
      Buf b;
      b.alloc(T, sh.K, sh.N);
      std::vector<bf16*> Ws(copies, b.W);
      for (int c = 1; c < copies; ++c) {
        CK(cudaMalloc(&Ws[c], wbytes));
        CK(cudaMemcpy(Ws[c], b.W, wbytes, cudaMemcpyDeviceToDevice));
      }
      auto time_us = [&](int atomic) {
        dcuda::gemm_set_atomic_splitk(atomic);
        return median_launch_us(30, [&](int it) {
          dcuda::gemm_path(GemmPath::Auto, 0, b.X, T, sh.K, Ws[(it + 3) % copies], sh.N, nullptr, b.Y, acc, 0);
        });
      };
      const double old_us = time_us(1), new_us = time_us(0);
      // the new one: reference and 5 runs (gemm_set_atomic_splitk(0) still set)
      b.run(GemmPath::Auto, 0, acc, !acc, 0);
      const double w = b.worst_vs_ref(acc, !acc);
      const std::vector<float> first = b.host();
      int differ = 0;
      for (int r = 1; r < 5; ++r) {
        b.run(GemmPath::Auto, 0, acc, !acc, 0);
        differ += !same_bits(first, b.host());
      }
      const bool bad = w > 1.0 || differ;
      failures += bad;
      std::printf("%-8s %6d %6d %5d %3d %10.1f %10.1f %7.2f %9.2g %s%s\n", sh.what, sh.K, sh.N, T, int(acc), old_us,
                  new_us, new_us / old_us, w, differ ? "DIFFER" : "same", bad ? "  MISMATCH" : "");
      for (int c = 1; c < copies; ++c) CK(cudaFree(Ws[c]));
      b.release();
      std::fflush(stdout);
    }
  }
  dcuda::gemm_set_atomic_splitk(-1);
  return failures;
}

}  // namespace gemm_bench
