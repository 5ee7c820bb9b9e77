// The NVLink ceiling between GPU 0 and GPU 1 on this host, for ep_bench's figures: bytes per second of
//   copy engine: cudaMemcpyPeerAsync 0 -> 1, and both directions at once;
//   SM stores:   a kernel on GPU 0 storing 16-byte vectors into GPU 1's memory (what ep_p2p's send kernels do),
//                one direction and both at once (each GPU writing into the other), grid of `blocks`.
// Median of 10 copies of 256 MiB. Needs peer access between the two GPUs.
//   nvlink_ceiling [--mib 256] [--blocks 264]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "check.h"

namespace {

__global__ void storeKernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds of one run of `launch` on each GPU in `gpus` at once (host clock around both; streams synced before).
template <typename F>
double timed(const std::vector<int>& gpus, cudaStream_t* streams, F&& launch) {
  for (int g : gpus) {
    EP_CUDA(cudaSetDevice(g));
    EP_CUDA(cudaStreamSynchronize(streams[g]));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int g : gpus) {
    EP_CUDA(cudaSetDevice(g));
    launch(g);
  }
  for (int g : gpus) {
    EP_CUDA(cudaSetDevice(g));
    EP_CUDA(cudaStreamSynchronize(streams[g]));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    size_t mib = 256;
    int blocks = 264;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string k = argv[i];
      if (k == "--mib") mib = std::stoul(argv[i + 1]);
      else if (k == "--blocks") blocks = std::stoi(argv[i + 1]);
      else throw std::runtime_error("unknown flag " + k);
    }
    int n = 0;
    EP_CUDA(cudaGetDeviceCount(&n));
    EP_CHECK(n >= 2, "needs 2 GPUs");
    int can01 = 0, can10 = 0;
    EP_CUDA(cudaDeviceCanAccessPeer(&can01, 0, 1));
    EP_CUDA(cudaDeviceCanAccessPeer(&can10, 1, 0));
    EP_CHECK(can01 && can10, "no peer access between GPU 0 and GPU 1");
    const size_t bytes = mib << 20;
    void *src[2], *dst[2];
    cudaStream_t st[2];
    for (int g = 0; g < 2; ++g) {
      EP_CUDA(cudaSetDevice(g));
      EP_CUDA(cudaDeviceEnablePeerAccess(1 - g, 0));
      EP_CUDA(cudaMalloc(&src[g], bytes));
      EP_CUDA(cudaMalloc(&dst[g], bytes));
      EP_CUDA(cudaMemset(src[g], g + 1, bytes));
      EP_CUDA(cudaStreamCreateWithFlags(&st[g], cudaStreamNonBlocking));
    }
    auto engine = [&](int g) { EP_CUDA(cudaMemcpyPeerAsync(dst[1 - g], 1 - g, src[g], g, bytes, st[g])); };
    auto sm = [&](int g) {
      storeKernel<<<blocks, 512, 0, st[g]>>>(static_cast<const uint4*>(src[g]), static_cast<uint4*>(dst[1 - g]), bytes / 16);
      EP_CUDA(cudaGetLastError());
    };
    struct Case {
      const char* name;
      std::vector<int> gpus;
      bool kernel;
    } cases[] = {{"copy-engine 0->1", {0}, false},
                 {"copy-engine 0<->1", {0, 1}, false},
                 {"sm-stores 0->1", {0}, true},
                 {"sm-stores 0<->1", {0, 1}, true}};
    std::printf("%-20s %14s  (GB/s per direction, %zu MiB, median of 10; SM stores: %d blocks x 512 threads)\n", "case", "GB/s", mib, blocks);
    for (const Case& c : cases) {
      std::vector<double> t;
      for (int it = 0; it < 12; ++it) {
        const double s = timed(c.gpus, st, [&](int g) { c.kernel ? sm(g) : engine(g); });
        if (it >= 2) t.push_back(s);
      }
      std::printf("%-20s %14.1f\n", c.name, bytes / median(t) / 1e9);
    }
    // The last SM copy 1 -> 0 must have landed intact (GPU 1's source bytes are all 2).
    std::vector<unsigned char> back(1 << 20);
    EP_CUDA(cudaSetDevice(0));
    EP_CUDA(cudaMemcpy(back.data(), dst[0], back.size(), cudaMemcpyDeviceToHost));
    EP_CHECK(std::all_of(back.begin(), back.end(), [](unsigned char b) { return b == 2; }), "peer copy corrupted data");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvlink_ceiling: %s\n", e.what());
    return 2;
  }
}
