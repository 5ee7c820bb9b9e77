// Timing harness for the dense GEMM paths (src/gemm.cu, src/gemm_mma.cuh) on the GPU machine;
// gemm-bench.sh builds and runs it. For each shape (K, N) and T it checks every path against a
// simple reference kernel (fp32 accumulation, one thread per output, on the same bf16 inputs)
// with a random bias, plain and accumulating, then times it with the weight rotated over
// copies that together exceed the L2 (so every launch streams W from HBM, as 48 layers do).
// Bound: |got - ref| <= 1e-3 * (sum_k |x w| + |bias| + |y0|) + 1e-6 per element.
// Prints one row per (shape, T, path, K split): median us over the timed launches (one launch
// between two events; a split path's memset of Y counts), GB/s (W + X read, Y written, once
// each), TFLOP/s (2 T K N) and the worst error over the bound of that path's two checks. Exit
// status 1 on any mismatch, 2 on a CUDA error.
//
//   gemm_bench [--quick] [--skip-edges] [--t LIST]  (LIST: comma-separated T values; default
//   1,8,16,32,64,512,8192; --quick: no per-row check lines, no K-split sweep)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "gemm.h"
#include "harness.cuh"

namespace dcuda {
// gemm.cu's PDL and fused-kernel switches live in fused_ops.cu with the model's kernels; the
// harness launches on stream 0 (launch_k never sets PDL there) and runs the current kernels.
bool legacy_kernels() { return false; }
bool pdl_enabled() { return false; }
}  // namespace dcuda

namespace {

using dcuda::bf16;
using dcuda::GemmPath;

#define CK(call) HARNESS_CK(call)

__global__ void fill_bf16(bf16* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16((float(h & 0xffffff) / 16777216.f - 0.5f) * scale);
  }
}

__global__ void fill_f32(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2246822519u ^ seed;
    h ^= h >> 16, h *= 2654435761u, h ^= h >> 13;
    p[i] = float(h & 0xffff) / 65536.f - 0.5f;
  }
}

// ref[t, n] = y0 + bias + sum_k x w (fp32), mag = |y0| + |bias| + sum_k |x w|: 32x32 outputs per
// block through shared-memory tiles of X and W (plain FMA loops, nothing shared with gemm.cu).
__global__ void __launch_bounds__(1024) reference(const bf16* X, int T, int K, const bf16* W, int N,
                                                  const float* bias, const float* y0, float* ref, float* mag) {
  __shared__ float sx[32][33], sw[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int n = blockIdx.x * 32 + tx, t = blockIdx.y * 32 + ty;
  float s = 0.f, m = 0.f;
  for (int k0 = 0; k0 < K; k0 += 32) {
    const int tr = blockIdx.y * 32 + ty, nr = blockIdx.x * 32 + ty;
    sx[ty][tx] = tr < T && k0 + tx < K ? __bfloat162float(X[size_t(tr) * K + k0 + tx]) : 0.f;
    sw[ty][tx] = nr < N && k0 + tx < K ? __bfloat162float(W[size_t(nr) * K + k0 + tx]) : 0.f;
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < 32; ++k) {
      const float p = sx[ty][k] * sw[tx][k];
      s += p, m += fabsf(p);
    }
    __syncthreads();
  }
  if (t >= T || n >= N) return;
  const size_t i = size_t(t) * N + n;
  const float b = bias ? bias[n] : 0.f, y = y0 ? y0[i] : 0.f;
  ref[i] = s + b + y;
  mag[i] = m + fabsf(b) + fabsf(y) + 1e-6f;
}

const char* name(GemmPath p) {
  switch (p) {
    case GemmPath::Gemv: return "gemv";
    case GemmPath::Legacy: return "legacy";
    case GemmPath::Skinny: return "skinny";
    case GemmPath::SkinnyAsync: return "skinnyA";
    case GemmPath::Stream: return "stream";
    case GemmPath::Tiled: return "tiled";
    case GemmPath::TiledWide: return "tiled256";
    default: return "auto";
  }
}

int grid_for(size_t n) { return int(std::min<size_t>((n + 255) / 256, 4096)); }

struct Shape {
  const char* what;
  int K, N;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> Ts = {1, 8, 16, 32, 64, 512, 8192};
  bool quick = false, edges_on = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--skip-edges")) edges_on = false;
    else if (!std::strcmp(argv[i], "--t") && i + 1 < argc) {
      Ts.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) Ts.push_back(std::atoi(tok));
    } else {
      std::fprintf(stderr, "usage: gemm_bench [--quick] [--skip-edges] [--t 1,8,16]\n");
      return 2;
    }
  }
  const std::vector<Shape> shapes = {
      {"qkv", 2048, 5120}, {"o_proj", 4096, 2048}, {"gate_up", 2048, 6144}, {"down", 6144, 2048},
      {"k4096n5120", 4096, 5120}, {"lm_head", 2048, 151936},
  };
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

  auto paths_for = [](int T) {
    std::vector<GemmPath> p;
    if (T <= 8) p.push_back(GemmPath::Auto), p.push_back(GemmPath::Gemv);  // Auto: gemv_fast where it applies
    p.push_back(GemmPath::Legacy);
    if (T <= 64) p.push_back(GemmPath::Skinny), p.push_back(GemmPath::SkinnyAsync), p.push_back(GemmPath::Stream);
    p.push_back(GemmPath::Tiled);
    if (T > 64) p.push_back(GemmPath::TiledWide);
    return p;
  };

  // ---- edge shapes: correctness only
  for (const auto& [T, sh] : edges) {
    if (!edges_on) break;
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
  std::printf("\n%-10s %6s %6s %7s %-8s %6s %10s %9s %9s %9s\n", "shape", "K", "N", "T", "path", "splits", "us",
              "GB/s", "TFLOP/s", "err/bound");
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
      if (T < 1 || (huge && T > 512)) continue;  // the LM head at prefill length: 1.2 G outputs
      const size_t nx = size_t(T) * K, ny = size_t(T) * N;
      bf16* X;
      float *bias, *Y, *y0, *ref, *mag;
      CK(cudaMalloc(&X, nx * 2));
      CK(cudaMalloc(&bias, N * 4));
      for (float** p : {&Y, &y0, &ref, &mag}) CK(cudaMalloc(p, ny * 4));
      fill_bf16<<<grid_for(nx), 256>>>(X, nx, 19u + T, 2.f);
      fill_f32<<<grid_for(N), 256>>>(bias, N, 23u);
      fill_f32<<<grid_for(ny), 256>>>(y0, ny, 29u);
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
        for (int sp : splits) {
          const int iters = T >= 4096 ? 10 : 50;
          cudaEvent_t e0, e1;
          CK(cudaEventCreate(&e0));
          CK(cudaEventCreate(&e1));
          std::vector<float> ms;
          for (int it = -3; it < iters; ++it) {
            const bf16* W = Ws[(it + 3) % copies];
            CK(cudaEventRecord(e0));
            dcuda::gemm_path(p, sp, X, T, K, W, N, nullptr, Y, false, 0);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float t;
            CK(cudaEventElapsedTime(&t, e0, e1));
            if (it >= 0) ms.push_back(t);
          }
          CK(cudaEventDestroy(e0));
          CK(cudaEventDestroy(e1));
          std::sort(ms.begin(), ms.end());
          const double us = ms[ms.size() / 2] * 1e3;
          const double bytes = double(wbytes) + double(nx) * 2 + double(ny) * 4;
          std::printf("%-10s %6d %6d %7d %-8s %6s %10.1f %9.0f %9.1f %9.2g\n", sh.what, K, N, T, name(p),
                      sp ? std::to_string(sp).c_str() : "auto", us, bytes / us * 1e-3,
                      2.0 * T * K * double(N) / us * 1e-6, worst);
        }
      }
      for (void* q : {(void*)X, (void*)bias, (void*)Y, (void*)y0, (void*)ref, (void*)mag}) CK(cudaFree(q));
    }
    for (bf16* w : Ws) CK(cudaFree(w));
    std::fflush(stdout);
  }
  std::printf("\n%s: %d mismatches\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
