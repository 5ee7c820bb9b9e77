// Correctness and speed of the router-logit linear layer (built and run by router-check.sh):
// Y[T, E] = X[T, H] . W[E, H]^T, all fp32. "old" = linear_f32() with DISPATCH_CUDA_ROUTER_TC unset
// (row kernels / the tiled CUDA-core kernel), "tc" = linear_f32_tc() (src/linear_f32_tc.cuh, 3xTF32
// mma.sync), both against an fp64 CPU reference on the same fp32 values.
//
//   router_check --part check|entry|time
//
// check: T {5, 17, 64, 100, 512, 8192} x (H 2048, E 128 / 64 / 8) and odd shapes (H 2052, 2044,
// 1000, 36; E 100, 37, 7, 130, 1; H 2047: tc refuses it, old is still checked), and T 2048-4100 with 65-128 experts
// (the prefill sizes, 64 x 128 tiles with 1-4 K splits). X uniform in [-2, 2),
// W in [-0.05, 0.05). Per output: rel = |y - ref| / sum_k |x_k w_k|; a case passes when every
// rel <= 2e-6. Also printed: max |y - ref| / max |ref| over the case. Each path runs 5 times and
// must give the same bits every time; tc's first run of each case is a CUDA graph captured around
// the launch (each tile configuration is first launched inside a capture: no allocation or
// attribute call may fail there).
// entry: needs DISPATCH_CUDA_ROUTER_TC=1 in the environment: linear_f32() then gives tc's bits for
// T > 16 and E >= 8 on fitting shapes, and is still within the bound at T <= 16, E 1 and H 2047.
// time: T {64, 512, 2048, 8192} x E {128, 64, 8}, H 2048: a CUDA graph of 20 launches, each on its own
// copy of W from a pool of >= 3 x L2 bytes (graphs replayed in turn, so every launch reads W
// from HBM as the model's layers do; X stays the same, as the previous kernel's output would be
// hot), mean us per launch (median of 5 sweeps over the pool); PDL on (non-default stream).
// Exit status: 0 all checks pass, 1 a mismatch, 2 a CUDA or setup error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>
#include "check.h"
#include "harness.cuh"
#include "ops.h"

using namespace dcuda;

namespace {

#define CK(call) HARNESS_CK(call)

constexpr double kTol = 2e-6;  // |y - ref| / sum |x w|

using harness::parallel_for;

// p[i] uniform in [-scale, scale) from harness::mix(seed, i) (the timing part's X and W pool)
__global__ void fill_uniform_f32(float* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = (float(harness::mix(seed * 0x100000001b3ull + i)) * (2.f / 4294967296.f) - 1.f) * scale;
}

struct Problem {
  int T, H, E;
  std::vector<float> X, W;
  std::vector<double> ref, mag;  // fp64 Y and sum_k |x w| per output
  float *dx = nullptr, *dw = nullptr, *dy = nullptr;
  Problem(int T_, int H_, int E_, uint32_t seed) : T(T_), H(H_), E(E_), X(size_t(T_) * H_), W(size_t(E_) * H_) {
    std::mt19937 rng{seed};
    std::uniform_real_distribution<float> ux(-2.f, 2.f), uw(-0.05f, 0.05f);
    for (float& x : X) x = ux(rng);
    for (float& w : W) w = uw(rng);
    CK(cudaMalloc(&dx, X.size() * 4));
    CK(cudaMalloc(&dw, W.size() * 4));
    CK(cudaMalloc(&dy, size_t(T) * E * 4));
    CK(cudaMemcpy(dx, X.data(), X.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw, W.data(), W.size() * 4, cudaMemcpyHostToDevice));
  }
  ~Problem() { cudaFree(dx), cudaFree(dw), cudaFree(dy); }
  void reference() {
    ref.assign(size_t(T) * E, 0.0), mag.assign(size_t(T) * E, 0.0);
    parallel_for(T, [&](int t) {
      for (int e = 0; e < E; ++e) {
        double s = 0, m = 0;
        for (int k = 0; k < H; ++k) {
          const double p = double(X[size_t(t) * H + k]) * W[size_t(e) * H + k];
          s += p, m += std::fabs(p);
        }
        ref[size_t(t) * E + e] = s, mag[size_t(t) * E + e] = m;
      }
    });
  }
};

struct Errors {
  double rel = 0, normwise = 0;
  bool ok = true;
};

std::vector<float> fetch(const Problem& p, cudaStream_t s) {
  CK(cudaStreamSynchronize(s));
  std::vector<float> y(size_t(p.T) * p.E);
  CK(cudaMemcpy(y.data(), p.dy, y.size() * 4, cudaMemcpyDeviceToHost));
  return y;
}

Errors errors(const Problem& p, const std::vector<float>& y) {
  harness::Tally tally;
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double err = std::fabs(double(y[i]) - p.ref[i]);
    tally.add_err(err / (p.mag[i] + 1e-30), kTol);
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(p.ref[i]));
  }
  return {tally.worst, max_err / (max_ref + 1e-30), tally.ok};
}

// 5 runs of launch (Y poisoned with NaN before each); the first inside a graph capture when
// `captured`. Returns the first run's Y; *same = every run gave its bits.
std::vector<float> five_runs(const Problem& p, const std::function<void()>& launch, bool captured, cudaStream_t s,
                             bool* same) {
  std::vector<float> first;
  *same = true;
  for (int run = 0; run < 5; ++run) {
    CK(cudaMemsetAsync(p.dy, 0xff, size_t(p.T) * p.E * 4, s));
    if (run == 0 && captured) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      launch();
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, s));
      CK(cudaStreamSynchronize(s));
      cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
    } else {
      launch();
    }
    std::vector<float> y = fetch(p, s);
    if (run == 0) first = std::move(y);
    else if (std::memcmp(first.data(), y.data(), y.size() * 4) != 0) *same = false;
  }
  return first;
}

struct Shape {
  int T, H, E;
};

bool part_check(cudaStream_t s) {
  if (linear_f32_tc_enabled()) {
    std::printf("check: DISPATCH_CUDA_ROUTER_TC=1 is set; 'old' would be tc. Unset it for this part.\n");
    return false;
  }
  std::vector<Shape> shapes;
  for (int T : {5, 17, 64, 100, 512, 8192})
    for (int E : {128, 64, 8}) shapes.push_back({T, 2048, E});
  for (Shape o : {Shape{64, 2052, 100}, Shape{300, 1000, 37}, Shape{33, 2044, 7}, Shape{17, 36, 130},
                  Shape{2500, 2052, 130}, Shape{100, 2048, 1}, Shape{64, 2047, 128}, Shape{2048, 2048, 128},
                  Shape{4100, 2048, 128}, Shape{3000, 1000, 100}, Shape{2049, 36, 65}})
    shapes.push_back(o);
  std::printf("rel = max |y - ref| / sum|x w| (bound %.0e); norm = max |y - ref| / max |ref|; same = 5 runs bit-identical\n",
              kTol);
  std::printf("%5s %5s %4s | %9s %9s %4s | %9s %9s %4s | %s\n", "T", "H", "E", "old rel", "old norm", "same", "tc rel",
              "tc norm", "same", "ok");
  bool all_ok = true;
  uint32_t seed = 1;
  for (const Shape& c : shapes) {
    Problem p(c.T, c.H, c.E, seed++);
    p.reference();
    bool same_old = false, same_tc = true;
    const std::vector<float> y_old =
        five_runs(p, [&] { linear_f32(p.dx, p.T, p.H, p.dw, p.E, p.dy, s); }, false, s, &same_old);
    const Errors e_old = errors(p, y_old);
    const bool fits = linear_f32_tc_fits(p.dx, p.H, p.dw);
    Errors e_tc;
    if (fits) {
      const std::vector<float> y_tc =
          five_runs(p, [&] { linear_f32_tc(p.dx, p.T, p.H, p.dw, p.E, p.dy, s); }, true, s, &same_tc);
      e_tc = errors(p, y_tc);
    }
    const bool refusal_ok = fits == (c.H % 4 == 0);
    const bool ok = e_old.ok && same_old && e_tc.ok && same_tc && refusal_ok;
    all_ok = all_ok && ok;
    char tc_cols[64];
    if (fits) std::snprintf(tc_cols, sizeof tc_cols, "%9.2e %9.2e %4s", e_tc.rel, e_tc.normwise, same_tc ? "yes" : "NO");
    else std::snprintf(tc_cols, sizeof tc_cols, "%9s %9s %4s", "refused", "-", "-");
    std::printf("%5d %5d %4d | %9.2e %9.2e %4s | %s | %s\n", c.T, c.H, c.E, e_old.rel, e_old.normwise,
                same_old ? "yes" : "NO", tc_cols, ok ? "ok" : "MISMATCH");
    std::fflush(stdout);
  }
  return all_ok;
}

bool part_entry(cudaStream_t s) {
  if (!linear_f32_tc_enabled()) {
    std::printf("entry: needs DISPATCH_CUDA_ROUTER_TC=1 in the environment\n");
    return false;
  }
  bool all_ok = true;
  uint32_t seed = 100;
  for (Shape c : {Shape{5, 2048, 128}, Shape{16, 2048, 128}, Shape{17, 2048, 128}, Shape{64, 2048, 128},
                  Shape{8192, 2048, 64}, Shape{64, 2048, 1}, Shape{64, 2047, 128}}) {
    Problem p(c.T, c.H, c.E, seed++);
    p.reference();
    CK(cudaMemsetAsync(p.dy, 0xff, size_t(p.T) * p.E * 4, s));
    linear_f32(p.dx, p.T, p.H, p.dw, p.E, p.dy, s);
    const std::vector<float> y = fetch(p, s);
    const Errors e = errors(p, y);
    bool ok = e.ok;
    const bool tc_expected = c.T > 16 && c.E >= 8 && linear_f32_tc_fits(p.dx, p.H, p.dw);
    if (tc_expected) {
      CK(cudaMemsetAsync(p.dy, 0xff, size_t(p.T) * p.E * 4, s));
      linear_f32_tc(p.dx, p.T, p.H, p.dw, p.E, p.dy, s);
      ok = ok && fetch(p, s) == y;
    }
    all_ok = all_ok && ok;
    std::printf("entry T %5d H %4d E %3d: rel %.2e, %s -> %s\n", c.T, c.H, c.E, e.rel,
                tc_expected ? "same bits as tc expected" : "old path expected", ok ? "ok" : "MISMATCH");
  }
  return all_ok;
}

// mean us per launch of f(W copy) over a pool of copies, 20 launches per graph.
double rotated_us(const std::function<void(const float*)>& f, const std::vector<const float*>& pool, cudaStream_t s) {
  constexpr int kPerGraph = 20;
  std::vector<cudaGraphExec_t> execs;
  for (size_t g0 = 0; g0 < pool.size(); g0 += kPerGraph) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kPerGraph; ++i) f(pool[g0 + i]);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaGraphDestroy(g);
    execs.push_back(ge);
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (cudaGraphExec_t ge : execs) CK(cudaGraphLaunch(ge, s));  // warm-up
  std::vector<double> sweeps;
  for (int rep = 0; rep < 5; ++rep) {
    CK(cudaEventRecord(e0, s));
    for (cudaGraphExec_t ge : execs) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    sweeps.push_back(ms * 1000.0 / double(pool.size()));
  }
  for (cudaGraphExec_t ge : execs) cudaGraphExecDestroy(ge);
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  std::sort(sweeps.begin(), sweeps.end());
  return sweeps[sweeps.size() / 2];
}

bool part_time(cudaStream_t s, size_t l2_bytes) {
  std::printf("mean us per launch, CUDA graphs of 20 launches, W rotated over >= 3 x L2 of copies; TF/s = 2 T E H / t\n");
  std::printf("%5s %4s %6s | %9s %9s | %7s %7s | %s\n", "T", "E", "copies", "old us", "tc us", "old TF", "tc TF", "old/tc");
  constexpr int H = 2048;
  for (int T : {64, 512, 2048, 8192})
    for (int E : {128, 64, 8}) {
      const size_t w_bytes = size_t(E) * H * 4;
      size_t copies = std::max<size_t>(20, (3 * l2_bytes + w_bytes - 1) / w_bytes);
      copies = (copies + 19) / 20 * 20;
      float *dx, *dy, *dw;
      CK(cudaMalloc(&dx, size_t(T) * H * 4));
      CK(cudaMalloc(&dy, size_t(T) * E * 4));
      CK(cudaMalloc(&dw, copies * w_bytes));
      fill_uniform_f32<<<1024, 256, 0, s>>>(dx, size_t(T) * H, 1, 2.f);
      fill_uniform_f32<<<1024, 256, 0, s>>>(dw, copies * size_t(E) * H, 2, 0.05f);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      std::vector<const float*> pool(copies);
      for (size_t i = 0; i < copies; ++i) pool[i] = dw + i * size_t(E) * H;
      const double u_old = rotated_us([&](const float* w) { linear_f32(dx, T, H, w, E, dy, s); }, pool, s);
      const double u_tc = rotated_us([&](const float* w) { linear_f32_tc(dx, T, H, w, E, dy, s); }, pool, s);
      const double flops = 2.0 * T * E * H;
      std::printf("%5d %4d %6zu | %9.2f %9.2f | %7.2f %7.2f | %.2fx\n", T, E, copies, u_old, u_tc, flops / u_old / 1e6,
                  flops / u_tc / 1e6, u_old / u_tc);
      std::fflush(stdout);
      cudaFree(dx), cudaFree(dy), cudaFree(dw);
    }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string part;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--part" && i + 1 < argc) part = argv[++i];
    else part = "?";
  }
  if (part != "check" && part != "entry" && part != "time") {
    std::fprintf(stderr, "usage: router_check --part check|entry|time\n");
    return 2;
  }
  try {
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB; part %s\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
                part.c_str());
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    bool ok = true;
    if (part == "check") ok = part_check(s);
    else if (part == "entry") ok = part_entry(s);
    else ok = part_time(s, size_t(prop.l2CacheSize));
    CK(cudaDeviceSynchronize());
    std::printf("part %s: %s\n", part.c_str(), ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "CUDA error: %s\n", e.what());
    return 2;
  }
}
