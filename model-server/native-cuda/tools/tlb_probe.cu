// Does a decode step's weight read pay for address translation? A stand-alone probe (only harness.cuh's error check): streaming reads
// of k "experts" picked at random from a pool much larger than L2 and than the TLBs' reach, timed with CUDA events,
// with and without their pages touched by a kernel just before (one prefetch.global.L2 per `stride` bytes, which
// fills the translation and moves almost no data), against one contiguous span of the same bytes.
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o /tmp/tlb_probe model-server/native-cuda/tools/tlb_probe.cu
//   /tmp/tlb_probe [pool_gb=64] [iters=200]
//
// Prints one line per case: the median microseconds of the read kernel alone and its bytes / time.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
#include "../scripts/harness.cuh"

#define CK HARNESS_CK

constexpr int kMaxParts = 16;
struct Parts {
  const uint4* p[kMaxParts];
  int n;
  size_t vecs;  // 16-byte vectors per part
};

// Every warp streams its share of the parts' vectors, 8 loads per lane in flight; one float per CTA keeps the sum.
__global__ void __launch_bounds__(256) read_kernel(Parts parts, float* out) {
  const size_t total = parts.vecs * parts.n;
  const size_t lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const size_t warps = (size_t(gridDim.x) * blockDim.x) >> 5;
  float acc = 0.f;
  for (size_t base = warp * 256; base < total; base += warps * 256) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const size_t i = base + lane + 32 * u;
      if (i < total) {
        const size_t part = i / parts.vecs;
        v[u] = __ldcs(parts.p[part] + (i - part * parts.vecs));
      } else {
        v[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  }
  if (acc == 1234.5f) out[blockIdx.x] = acc;  // never true on these bytes; keeps the loads
}

// One prefetch.global.L2 per `stride` bytes of every part.
__global__ void touch_kernel(Parts parts, size_t stride) {
  const size_t bytes = parts.vecs * 16, per = (bytes + stride - 1) / stride;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < per * parts.n; i += size_t(gridDim.x) * blockDim.x) {
    const char* a = reinterpret_cast<const char*>(parts.p[i / per]) + (i % per) * stride;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
  }
}

int main(int argc, char** argv) {
  const double pool_gb = argc > 1 ? std::atof(argv[1]) : 64.0;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 200;
  const size_t pool = size_t(pool_gb * (1 << 30));
  char* base = nullptr;
  CK(cudaMalloc(&base, pool));
  CK(cudaMemset(base, 0x3c, pool));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out = nullptr;
  CK(cudaMalloc(&out, 4096 * sizeof(float)));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::mt19937_64 rng(7);

  struct Case {
    const char* name;
    size_t part_bytes;
    int parts;
    bool contiguous;
    size_t touch_stride;  // 0: none
    int ctas_per_sm;
  };
  const size_t gu = size_t(1536) * 2048 * 2, dn = size_t(2048) * 768 * 2;  // Qwen3-30B-A3B expert gate|up, down
  const Case cases[] = {
      {"gate_up 8 experts, cold", gu, 8, false, 0, 4},
      {"gate_up 8 experts, pages touched (64 KB)", gu, 8, false, 65536, 4},
      {"gate_up 8 experts, pages touched (2 MB)", gu, 8, false, 2 << 20, 4},
      {"gate_up 8 experts, same 8 again (warm)", gu, 8, false, size_t(-1), 4},
      {"gate_up bytes contiguous, cold", gu * 8, 1, true, 0, 4},
      {"gate_up bytes contiguous, touched (64 KB)", gu * 8, 1, true, 65536, 4},
      {"down 8 experts, cold", dn, 8, false, 0, 4},
      {"down 8 experts, pages touched (64 KB)", dn, 8, false, 65536, 4},
      {"gate_up 8 experts, cold, 8 CTAs/SM", gu, 8, false, 0, 8},
      {"gate_up 8 experts, touched (64 KB), 8 CTAs/SM", gu, 8, false, 65536, 8},
      {"640 MB contiguous, cold", size_t(640) << 20, 1, true, 0, 4},
  };
  for (const Case& c : cases) {
    std::vector<float> us;
    for (int it = 0; it < iters; ++it) {
      Parts p{};
      p.n = c.parts;
      p.vecs = c.part_bytes / 16;
      const size_t slots = pool / c.part_bytes;
      for (int j = 0; j < c.parts; ++j) p.p[j] = reinterpret_cast<const uint4*>(base + (rng() % slots) * c.part_bytes);
      // evict: read 128 MB elsewhere first (L2 holds 50 MB)
      Parts ev{};
      ev.n = 1;
      ev.vecs = (size_t(128) << 20) / 16;
      ev.p[0] = reinterpret_cast<const uint4*>(base + (rng() % (pool / (size_t(128) << 20))) * (size_t(128) << 20));
      read_kernel<<<4 * sms, 256>>>(ev, out);
      if (c.touch_stride == size_t(-1)) read_kernel<<<c.ctas_per_sm * sms, 256>>>(p, out);
      else if (c.touch_stride) touch_kernel<<<sms, 256>>>(p, c.touch_stride);
      CK(cudaDeviceSynchronize());
      CK(cudaEventRecord(e0));
      read_kernel<<<c.ctas_per_sm * sms, 256>>>(p, out);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0.f;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      us.push_back(ms * 1000.f);
    }
    std::sort(us.begin(), us.end());
    const float med = us[us.size() / 2];
    const double bytes = double(c.part_bytes) * c.parts;
    std::printf("%-50s %9.2f us  %6.2f TB/s  (p10 %.2f, p90 %.2f us)\n", c.name, med, bytes / (med * 1e-6) / 1e12,
                us[us.size() / 10], us[us.size() * 9 / 10]);
  }
  return 0;
}
