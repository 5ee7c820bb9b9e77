// Correctness and speed of the decode-size dense GEMMs on the GPU (built and run by gemv-check.sh):
// gemv_fast (src/gemv_fast.cu) and GemmPath::Stream (src/gemm_stream.cuh), against an fp64 CPU
// reference on the same bf16 values and against the earlier kernels (gemm.cu's GEMV, the skinny
// mma.sync GEMM of gemm_mma.cuh).
//
//   gemv_check --part check|stream|time [--iters N]
//
// check: T 1..8 x K {2048, 4096, 40, 4104} x N {5120, 2048, 151936, 33}; each case one of the
// four bias/accumulate combinations (rotating, so every combination meets every T, K and N);
// N = 151936 checks 384 rows (first, last and spread), the others every row. An element passes
// when |y - ref| <= 1e-4 * sum_k |w x| + 1e-5 * (1 + |y_prev|). Then: the refusals (T 0 and 9,
// K % 8 != 0, X or W not 16-byte aligned) return false and gemm() still gets those shapes right
// through its other paths; two runs give the same bits; and a PDL chain on a non-default stream
// (a slow kernel that writes X, then gemv_fast) reads X only after the producer finished.
// stream: the same bound for GemmPath::Stream at T 1..64 (see part_stream).
// time: qkv (K 2048, N 5120), o_proj (K 4096, N 2048) and the LM head (K 2048, N 151936) at
// T 1, 2, 4, 8 (gemv, fast = gemv_fast, stream) and 16, 32, 64 (skinny, stream): "cold" = median
// of --iters launches each after a 256 MB memset that evicts L2 (CUDA events around the one
// launch; a split skinny launch's memset of Y counts); "hot" = a CUDA graph of 20 launches on the
// same W (W partly in L2 when it fits), mean per launch; "rotate" = a CUDA graph of 20 launches
// each on a different copy of W (the model's case: every layer's weights are new; 2 alternating
// copies for the LM head), mean per launch. GB/s counts W's bytes (N x K x 2) per launch.
// Exit status: 0 all checks pass, 1 a mismatch, 2 a CUDA or setup error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "check.h"
#include "gemm.h"
#include "gemv_fast.h"
#include "harness.cuh"
#include "pdl.h"

namespace dcuda {
bool legacy_kernels() { return false; }
bool pdl_enabled() { return true; }  // launch_k() sets the PDL attribute on non-default streams
}  // namespace dcuda

using namespace dcuda;
using harness::bf16_to_float;

namespace {

#define CK(call) HARNESS_CK(call)

uint16_t to_bf(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// uniform in [-1, 1) from a splitmix64 hash (fast enough for the 1.2 GB LM-head pool)
std::vector<uint16_t> rand_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (seed << 40) + i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v[i] = to_bf(float(int32_t(uint32_t(z))) * (1.f / 2147483648.f));
  }
  return v;
}

// a kernel that lets its dependent launch at once (griddepcontrol.launch_dependents), waits
// ~spin_ns, then writes dst = src: the PDL producer
__global__ void slow_copy(const uint16_t* src, uint16_t* dst, int n, long long spin_ns) {
  pdl_trigger();
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > spin_ns) break;
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { CK(cudaMalloc(&p, std::max<size_t>(bytes, 16))); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
};

std::vector<int> check_rows(int N) {
  std::vector<int> rows;
  if (N <= 8192) {
    for (int n = 0; n < N; ++n) rows.push_back(n);
    return rows;
  }
  for (int n = 0; n < 128; ++n) rows.push_back(n), rows.push_back(N - 1 - n);
  for (int i = 0; i < 128; ++i) rows.push_back(int((int64_t(i) * 7919 * 131 + 4099) % N));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// compares Y [T, N] (device) on the chosen rows with the fp64 reference; returns failures
int compare(const char* what, const uint16_t* x, const uint16_t* w, const std::vector<float>& bias, const float* y0, const float* dY, int T, int K, int N,
            bool use_bias, bool acc) {
  std::vector<float> y(size_t(T) * N);
  CK(cudaMemcpy(y.data(), dY, y.size() * 4, cudaMemcpyDeviceToHost));
  const std::vector<int> rows = check_rows(N);
  std::vector<int> bad(T * rows.size(), 0);
  std::vector<double> worst(T * rows.size(), 0.0);
  const int nth = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> th;
  for (int k = 0; k < nth; ++k)
    th.emplace_back([&, k] {
      for (size_t i = k; i < rows.size(); i += nth) {
        const int n = rows[i];
        for (int t = 0; t < T; ++t) {
          double s = 0, a = 0;
          for (int j = 0; j < K; ++j) {
            const double p = double(bf16_to_float(w[size_t(n) * K + j])) * bf16_to_float(x[size_t(t) * K + j]);
            s += p, a += std::fabs(p);
          }
          if (use_bias) s += bias[n];
          const double prev = acc ? y0[size_t(t) * N + n] : 0.0;
          s += prev;
          const double got = y[size_t(t) * N + n];
          const double err = std::fabs(got - s), tol = 1e-4 * a + 1e-5 * (1.0 + std::fabs(prev));
          worst[t * rows.size() + i] = err / tol;
          bad[t * rows.size() + i] = !(err <= tol);
        }
      }
    });
  for (auto& t : th) t.join();
  int fails = 0;
  double wr = 0;
  for (size_t i = 0; i < bad.size(); ++i) fails += bad[i], wr = std::max(wr, worst[i]);
  if (fails)
    std::printf("FAIL %s T=%d K=%d N=%d bias=%d acc=%d: %d of %zu elements off (worst err/tol %.2f)\n", what, T, K, N,
                use_bias, acc, fails, bad.size(), wr);
  return fails;
}

int part_check() {
  int failures = 0, cases = 0;
  const int Ks[] = {2048, 4096, 40, 4104};
  const int Ns[] = {5120, 2048, 151936, 33};
  const int maxK = 4104, maxN = 151936;
  const auto hx = rand_bf16(size_t(8) * maxK + 64, 11);
  const auto hw = rand_bf16(size_t(maxN) * maxK + 64, 12);
  std::vector<float> hb(maxN), hy0(size_t(8) * maxN);
  {
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> d(-2.f, 2.f);
    for (auto& v : hb) v = d(rng);
    for (auto& v : hy0) v = d(rng);
  }
  Dev dx(hx.size() * 2), dw(hw.size() * 2), db(hb.size() * 4), dy(hy0.size() * 4), dy2(hy0.size() * 4);
  CK(cudaMemcpy(dx.p, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw.p, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db.p, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  const bf16* X = dx.as<bf16>();
  const bf16* W = dw.as<bf16>();
  int combo = 0;
  for (int K : Ks)
    for (int N : Ns)
      for (int T = 1; T <= 8; ++T, ++combo) {
        const bool use_bias = combo % 2 == 1, acc = (combo / 2) % 2 == 1;
        // X [T, K], W [N, K] and Y's previous values: the fronts of the pools
        const uint16_t *x = hx.data(), *w = hw.data();
        const float* y0 = hy0.data();
        const size_t ny = size_t(T) * N;
        CK(cudaMemcpy(dy.p, y0, ny * 4, cudaMemcpyHostToDevice));
        if (!gemv_fast(X, T, K, W, N, use_bias ? db.as<float>() : nullptr, dy.as<float>(), acc, nullptr)) {
          std::printf("FAIL gemv_fast refused T=%d K=%d N=%d\n", T, K, N);
          ++failures;
          continue;
        }
        CK(cudaDeviceSynchronize());
        ++cases;
        failures += compare("gemv_fast", x, w, hb, y0, dy.as<float>(), T, K, N, use_bias, acc) != 0;
        // same bits on a second run
        CK(cudaMemcpy(dy2.p, y0, ny * 4, cudaMemcpyHostToDevice));
        gemv_fast(X, T, K, W, N, use_bias ? db.as<float>() : nullptr, dy2.as<float>(), acc, nullptr);
        CK(cudaDeviceSynchronize());
        std::vector<float> a(ny), b(ny);
        CK(cudaMemcpy(a.data(), dy.p, a.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), dy2.p, b.size() * 4, cudaMemcpyDeviceToHost));
        if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0) {
          std::printf("FAIL gemv_fast T=%d K=%d N=%d: two runs differ\n", T, K, N);
          ++failures;
        }
      }
  std::printf("check: %d shapes through gemv_fast, %d failed\n", cases, failures);

  // refusals, and gemm() (Auto) still right on those shapes
  struct Odd {
    const char* what;
    int T, K, N, xoff, woff;
  } odd[] = {{"T=0", 0, 2048, 64, 0, 0},      {"T=9", 9, 2048, 64, 0, 0},     {"K=36", 1, 36, 33, 0, 0},
             {"K=4100", 4, 4100, 70, 0, 0},   {"X+2B", 2, 2048, 64, 1, 0},    {"W+2B", 3, 2048, 64, 0, 1},
             {"W+8B", 8, 4096, 40, 0, 4}};
  int odd_fail = 0;
  for (const Odd& o : odd) {
    const bf16* Xo = X + o.xoff;
    const bf16* Wo = W + o.woff;
    const bool took = gemv_fast(Xo, o.T, o.K, Wo, o.N, nullptr, dy.as<float>(), false, nullptr);
    if (took) {
      std::printf("FAIL gemv_fast took %s\n", o.what);
      ++odd_fail;
      continue;
    }
    if (o.T < 1) continue;
    const uint16_t *x = hx.data() + o.xoff, *w = hw.data() + o.woff;
    const float* y0 = hy0.data();
    CK(cudaMemcpy(dy.p, y0, size_t(o.T) * o.N * 4, cudaMemcpyHostToDevice));
    gemm(Xo, o.T, o.K, Wo, o.N, db.as<float>(), dy.as<float>(), true, nullptr);
    CK(cudaDeviceSynchronize());
    odd_fail += compare(o.what, x, w, hb, y0, dy.as<float>(), o.T, o.K, o.N, true, true) != 0;
  }
  std::printf("refusals: %zu odd shapes, %d failed\n", sizeof(odd) / sizeof(odd[0]), odd_fail);
  failures += odd_fail;

  // the earlier GEMV and gemm() (Auto) on one shape each, through the same comparison
  {
    const int T = 5, K = 2048, N = 5120;
    const uint16_t *x = hx.data(), *w = hw.data();
    const float* y0 = hy0.data();
    CK(cudaMemcpy(dy.p, y0, size_t(T) * N * 4, cudaMemcpyHostToDevice));
    gemm_path(GemmPath::Gemv, 0, X, T, K, W, N, db.as<float>(), dy.as<float>(), true, nullptr);
    CK(cudaDeviceSynchronize());
    const int f1 = compare("legacy gemv", x, w, hb, y0, dy.as<float>(), T, K, N, true, true);
    CK(cudaMemcpy(dy.p, y0, size_t(T) * N * 4, cudaMemcpyHostToDevice));
    gemm(X, T, K, W, N, nullptr, dy.as<float>(), false, nullptr);
    CK(cudaDeviceSynchronize());
    const int f2 = compare("gemm auto", x, w, hb, y0, dy.as<float>(), T, K, N, false, false);
    std::printf("legacy gemv / gemm(): %s / %s\n", f1 ? "FAIL" : "ok", f2 ? "FAIL" : "ok");
    failures += (f1 != 0) + (f2 != 0);
  }

  // PDL: a producer that takes ~50 us writes X on a non-default stream, gemv_fast follows with
  // the PDL attribute (launched while the producer still runs); X must be the new one
  {
    const int T = 8, K = 4096, N = 2048;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    Dev xnew(size_t(T) * K * 2);
    const auto hx2 = rand_bf16(size_t(T) * K, 99);
    Dev xsrc(hx2.size() * 2);
    CK(cudaMemcpy(xsrc.p, hx2.data(), hx2.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(xnew.p, 0, hx2.size() * 2));
    const std::vector<float> y0(size_t(T) * N, 0.f);
    int pdl_fail = 0;
    for (int rep = 0; rep < 3; ++rep) {
      CK(cudaMemsetAsync(xnew.p, 0, hx2.size() * 2, st));
      slow_copy<<<64, 256, 0, st>>>(xsrc.as<uint16_t>(), xnew.as<uint16_t>(), T * K, 50000);
      CK(cudaGetLastError());
      gemv_fast(xnew.as<bf16>(), T, K, W, N, nullptr, dy.as<float>(), false, st);
      CK(cudaStreamSynchronize(st));
      pdl_fail += compare("pdl chain", hx2.data(), hw.data(), hb, y0.data(), dy.as<float>(), T, K, N, false, false) != 0;
    }
    std::printf("pdl chain: %s\n", pdl_fail ? "FAIL" : "ok");
    failures += pdl_fail;
    CK(cudaStreamDestroy(st));
  }
  return failures ? 1 : 0;
}

// GemmPath::Stream (src/gemm_stream.cuh) against the fp64 reference: every T in Ts x every (K, N),
// bias and accumulate rotating; N off the 128-row tile, K tails past the 64-k stage, K below one
// stage; explicit cluster sizes (non powers of two, a trailing rank with no K); two runs give the
// same bits; gemm() (Auto) at T = 33; and a PDL chain into a clustered launch.
int part_stream() {
  const int Ts[] = {1, 2, 3, 5, 8, 9, 16, 17, 31, 33, 48, 64};
  struct KN {
    int K, N;
  } kns[] = {{2048, 5120}, {4096, 2048}, {2048, 151936}, {40, 33}, {4104, 300}, {136, 130}, {200, 8}, {1032, 261}};
  const size_t maxX = size_t(64) * 4104, maxW = size_t(151936) * 2048, maxY = size_t(64) * 151936;
  const auto hx = rand_bf16(maxX + 64, 31);
  const auto hw = rand_bf16(maxW + 64, 32);
  std::vector<float> hb(151936), hy0(maxY);
  {
    std::mt19937 rng(33);
    std::uniform_real_distribution<float> d(-2.f, 2.f);
    for (auto& v : hb) v = d(rng);
    for (auto& v : hy0) v = d(rng);
  }
  Dev dx(hx.size() * 2), dw(hw.size() * 2), db(hb.size() * 4), dy(maxY * 4), dy2(maxY * 4);
  CK(cudaMemcpy(dx.p, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw.p, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db.p, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  const bf16* X = dx.as<bf16>();
  const bf16* W = dw.as<bf16>();
  int failures = 0, cases = 0;
  // one run (plus a second, compared bit for bit); returns failures
  auto one = [&](const char* what, GemmPath path, int splits, int T, int K, int N, bool use_bias, bool acc) {
    const size_t ny = size_t(T) * N;
    const float* bias = use_bias ? db.as<float>() : nullptr;
    CK(cudaMemcpy(dy.p, hy0.data(), ny * 4, cudaMemcpyHostToDevice));
    if (!acc) CK(cudaMemset(dy.p, 0xff, ny * 4));  // NaN: a missed store shows
    gemm_path(path, splits, X, T, K, W, N, bias, dy.as<float>(), acc, nullptr);
    CK(cudaDeviceSynchronize());
    ++cases;
    int f = compare(what, hx.data(), hw.data(), hb, hy0.data(), dy.as<float>(), T, K, N, use_bias, acc) != 0;
    CK(cudaMemcpy(dy2.p, hy0.data(), ny * 4, cudaMemcpyHostToDevice));
    gemm_path(path, splits, X, T, K, W, N, bias, dy2.as<float>(), acc, nullptr);
    CK(cudaDeviceSynchronize());
    std::vector<float> a(ny), b(ny);
    CK(cudaMemcpy(a.data(), dy.p, ny * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), dy2.p, ny * 4, cudaMemcpyDeviceToHost));
    if (std::memcmp(a.data(), b.data(), ny * 4) != 0) {
      std::printf("FAIL %s T=%d K=%d N=%d splits=%d: two runs differ\n", what, T, K, N, splits);
      f = 1;
    }
    return f;
  };
  // combination si + ti: each T meets all four bias/accumulate combinations over the shapes
  for (int si = 0; si < int(sizeof(kns) / sizeof(kns[0])); ++si)
    for (int ti = 0; ti < int(sizeof(Ts) / sizeof(Ts[0])); ++ti) {
      const int combo = si + ti;
      const bool use_bias = combo % 2 == 1, acc = (combo / 2) % 2 == 1;
      failures += one("stream", GemmPath::Stream, 0, Ts[ti], kns[si].K, kns[si].N, use_bias, acc);
    }
  struct Split {
    int T, K, N, splits;
  } splits[] = {{33, 4096, 2048, 1}, {33, 4096, 2048, 3}, {33, 4096, 2048, 5}, {64, 4096, 2048, 8},
                {17, 4104, 300, 2},  {17, 4104, 300, 7},  {9, 200, 8, 3},      {1, 2048, 5120, 6}};
  for (const Split& sp : splits) failures += one("stream splits", GemmPath::Stream, sp.splits, sp.T, sp.K, sp.N, true, sp.T % 2);
  failures += one("gemm auto", GemmPath::Auto, 0, 33, 2048, 5120, true, false);
  std::printf("stream: %d runs (each twice), %d failed\n", cases, failures);

  // PDL: a producer that takes ~50 us writes X on a non-default stream; the clustered stream
  // GEMM follows with the PDL attribute and must read the new X
  {
    const int T = 33, K = 4096, N = 2048;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const auto hx2 = rand_bf16(size_t(T) * K, 98);
    Dev xnew(hx2.size() * 2), xsrc(hx2.size() * 2);
    CK(cudaMemcpy(xsrc.p, hx2.data(), hx2.size() * 2, cudaMemcpyHostToDevice));
    const std::vector<float> y0(size_t(T) * N, 0.f);
    int pdl_fail = 0;
    for (int rep = 0; rep < 3; ++rep) {
      CK(cudaMemsetAsync(xnew.p, 0, hx2.size() * 2, st));
      slow_copy<<<64, 256, 0, st>>>(xsrc.as<uint16_t>(), xnew.as<uint16_t>(), T * K, 50000);
      CK(cudaGetLastError());
      gemm_path(GemmPath::Stream, 0, xnew.as<bf16>(), T, K, W, N, nullptr, dy.as<float>(), false, st);
      CK(cudaStreamSynchronize(st));
      pdl_fail += compare("stream pdl", hx2.data(), hw.data(), hb, y0.data(), dy.as<float>(), T, K, N, false, false) != 0;
    }
    std::printf("stream pdl chain: %s\n", pdl_fail ? "FAIL" : "ok");
    failures += pdl_fail;
    CK(cudaStreamDestroy(st));
  }
  return failures ? 1 : 0;
}

void part_time(int iters) {
  struct Shape {
    const char* name;
    int K, N, copies;
  } shapes[] = {{"qkv", 2048, 5120, 20}, {"o_proj", 4096, 2048, 20}, {"lm_head", 2048, 151936, 2}};
  const int Ts[] = {1, 2, 4, 8, 16, 32, 64};
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Dev flush(size_t(256) << 20);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const auto hx = rand_bf16(size_t(64) * 4096, 21);
  Dev dx(hx.size() * 2), dy(size_t(64) * 151936 * 4);
  CK(cudaMemcpy(dx.p, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  // x_read: rotate_us over W's read time at 4.3 TB/s (the H200's measured HBM rate; the targets:
  // <= 1.25 at T = 1, <= 1.5 at T = 16..64)
  std::printf("%-8s %2s %-6s %10s %10s %10s %10s %10s %10s %7s\n", "shape", "T", "path", "cold_us", "cold_GB/s", "hot_us",
              "hot_GB/s", "rotate_us", "rotate_GB/s", "x_read");
  for (const Shape& sh : shapes) {
    const size_t wbytes = size_t(sh.N) * sh.K * 2;
    std::vector<Dev*> ws;
    {
      const auto hw = rand_bf16(size_t(sh.N) * sh.K, 22);
      for (int c = 0; c < sh.copies; ++c) {
        ws.push_back(new Dev(wbytes));
        CK(cudaMemcpy(ws.back()->p, hw.data(), wbytes, cudaMemcpyHostToDevice));
      }
    }
    for (int T : Ts) {
      // old: the GEMVs at T <= 8 (gemm.cu's, and gemv_fast which Auto uses at 4 <= T <= 8), the
      // skinny GEMM above; new: the stream GEMM
      {
        int cluster = 0, per_sm = 0, clusters = 0;
        gemm_stream_info(T, sh.K, sh.N, &cluster, &per_sm, &clusters);
        std::printf("# %s T=%d stream: %d x %d CTAs, cluster %d, %d CTAs/SM resident, %d clusters resident\n",
                    sh.name, T, (sh.N + 127) / 128, cluster, cluster, per_sm, clusters);
      }
      std::vector<const char*> paths;
      if (T <= 8) paths = {"gemv", "fast", "stream"};
      else paths = {"skinny", "stream"};
      for (const char* path : paths) {
        const std::string pn = path;
        auto launch = [&](const bf16* W) {
          const bf16* Xd = dx.as<bf16>();
          if (pn == "fast") {
            if (!gemv_fast(Xd, T, sh.K, W, sh.N, nullptr, dy.as<float>(), false, st)) std::exit(2);
          } else {
            const GemmPath gp = pn == "gemv" ? GemmPath::Gemv : pn == "skinny" ? GemmPath::Skinny : GemmPath::Stream;
            gemm_path(gp, 0, Xd, T, sh.K, W, sh.N, nullptr, dy.as<float>(), false, st);
          }
        };
        // cold
        const float cold_us =
            harness::cold_median_us([&] { launch(ws[0]->as<bf16>()); }, flush.p, size_t(256) << 20, st, iters, e0, e1);
        // hot / stream graphs of 20 launches
        float graph_us[2];
        for (int mode = 0; mode < 2; ++mode) {
          cudaGraph_t g;
          cudaGraphExec_t ge;
          CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
          for (int i = 0; i < 20; ++i) launch(ws[mode == 0 ? 0 : i % sh.copies]->as<bf16>());
          CK(cudaStreamEndCapture(st, &g));
          CK(cudaGraphInstantiate(&ge, g, 0));
          CK(cudaGraphLaunch(ge, st));  // warm-up
          CK(cudaStreamSynchronize(st));
          const int reps = 5;
          CK(cudaEventRecord(e0, st));
          for (int r = 0; r < reps; ++r) CK(cudaGraphLaunch(ge, st));
          CK(cudaEventRecord(e1, st));
          CK(cudaEventSynchronize(e1));
          float ms;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          graph_us[mode] = ms * 1000.f / (reps * 20);
          CK(cudaGraphExecDestroy(ge));
          CK(cudaGraphDestroy(g));
        }
        auto gbs = [&](float us) { return double(wbytes) / (us * 1e-6) / 1e9; };
        std::printf("%-8s %2d %-6s %10.2f %10.0f %10.2f %10.0f %10.2f %10.0f %7.2f\n", sh.name, T, path, cold_us,
                    gbs(cold_us), graph_us[0], gbs(graph_us[0]), graph_us[1], gbs(graph_us[1]),
                    graph_us[1] / (double(wbytes) / 4.3e6));
        std::fflush(stdout);
      }
    }
    for (Dev* d : ws) delete d;
  }
  CK(cudaGetLastError());
  CK(cudaStreamDestroy(st));
}

}  // namespace

int main(int argc, char** argv) {
  std::string part = "check";
  int iters = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--part")) part = argv[i + 1];
    else if (!std::strcmp(argv[i], "--iters")) iters = std::max(1, std::atoi(argv[i + 1]));
  }
  int dev = 0;
  cudaDeviceProp prop;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  try {
    if (part == "check") return part_check();
    if (part == "stream") return part_stream();
    if (part == "time") {
      part_time(iters);
      return 0;
    }
  } catch (const CudaError& e) {
    std::printf("CudaError: %s\n", e.what());
    return 2;
  }
  std::printf("unknown --part %s\n", part.c_str());
  return 2;
}
