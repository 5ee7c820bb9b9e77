// Dispatch/combine bandwidth and latency of native-ep's NCCL backend on one multi-GPU host: one thread per GPU, one rank each,
// communicators from one ncclGetUniqueId. Every run first checks one round trip against a host
// reference (expert e := scale[e] * row), then times the modes.
//
//   ep_bench --gpus 8 --hidden 7168 --experts 256 --topk 8 --tokens 128,4096 --iters 30 --json out.json
//
// Figures, per rank, median over iterations (CUDA events around each call on the rank's stream):
//   high-throughput: bytes = received tokens * H * 2 (bf16), the quantity DeepEP's normal-mode
//     NVL bandwidth counts; dispatch includes its count exchange and host sync.
//   low-latency: bytes = received rows * H * 2 (bf16; DeepEP's published dispatch figure is FP8),
//     and wire bytes (the fixed capacity regions NCCL moves) reported beside them.
// Legend: T tokens per rank, H hidden, E experts, k top-k, N ranks.
#include <cuda_bf16.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "check.h"
#include "ep.h"
#include "ep_kernels.cuh"

using namespace dispatch::ep;

namespace {

struct Args {
  int gpus = 2, hidden = 7168, experts = 256, topk = 8, iters = 30, warmup = 5;
  std::vector<int> tokens{128, 4096};
  std::string json;
};

struct Row {
  std::string mode;
  int tokens, rank;
  double dispatch_us, combine_us, bytes, wire_bytes, max_err;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("flag " + k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--gpus") a.gpus = std::stoi(v);
    else if (k == "--hidden") a.hidden = std::stoi(v);
    else if (k == "--experts") a.experts = std::stoi(v);
    else if (k == "--topk") a.topk = std::stoi(v);
    else if (k == "--iters") a.iters = std::stoi(v);
    else if (k == "--json") a.json = v;
    else if (k == "--tokens") {
      a.tokens.clear();
      for (size_t p = 0; p < v.size();) {
        const size_t q = v.find(',', p);
        a.tokens.push_back(std::stoi(v.substr(p, q - p)));
        p = q == std::string::npos ? v.size() : q + 1;
      }
    } else throw std::runtime_error("unknown flag " + k);
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

float bf(float f) { return __bfloat162float(__float2bfloat16(f)); }

// One rank: inputs seeded by (rank, T) so the host reference can rebuild any rank's tokens.
struct Inputs {
  std::vector<float> x, w;
  std::vector<int32_t> ids;
};
Inputs makeInputs(int rank, int T, const Args& a) {
  std::mt19937 g(1000 * rank + T);
  std::uniform_real_distribution<float> u(-1, 1), pw(0.05f, 1.f);
  Inputs in;
  in.x.resize(size_t(T) * a.hidden);
  for (auto& v : in.x) v = bf(u(g));
  in.ids.resize(size_t(T) * a.topk);
  in.w.resize(in.ids.size());
  std::uniform_int_distribution<int> pe(0, a.experts - 1);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < a.topk; ++j) {
      int e;
      do { e = pe(g); } while (std::find(&in.ids[size_t(t) * a.topk], &in.ids[size_t(t) * a.topk + j], e) != &in.ids[size_t(t) * a.topk + j]);
      in.ids[size_t(t) * a.topk + j] = e;
      in.w[size_t(t) * a.topk + j] = pw(g);
    }
  }
  return in;
}

void rankMain(int rank, const Args& a, const std::vector<uint8_t>& id, std::vector<Row>& rows) {
  EP_CUDA(cudaSetDevice(rank));
  EpConfig c;
  c.rank = rank;
  c.num_ranks = a.gpus;
  c.device = rank;
  c.num_experts = a.experts;
  c.hidden = a.hidden;
  c.top_k = a.topk;
  c.max_tokens_ht = *std::max_element(a.tokens.begin(), a.tokens.end());
  c.max_tokens_ll = 128;
  const int Le = a.experts / a.gpus;
  for (int r = 0; r < a.gpus; ++r) {
    c.placement.emplace_back();
    for (int i = 0; i < Le; ++i) c.placement.back().push_back(r * Le + i);
  }
  auto nccl = createNcclBackend(c, id.data());
  EpBackend& b = *nccl;
  cudaStream_t s;
  EP_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<float> scale(a.experts);
  for (int e = 0; e < a.experts; ++e) scale[e] = 0.5f + 0.01f * e;
  float* dscale;
  EP_CUDA(cudaMalloc(&dscale, scale.size() * 4));
  EP_CUDA(cudaMemcpy(dscale, scale.data(), scale.size() * 4, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1, e2;
  EP_CUDA(cudaEventCreate(&e0));
  EP_CUDA(cudaEventCreate(&e1));
  EP_CUDA(cudaEventCreate(&e2));

  for (int T : a.tokens) {
    Inputs in = makeInputs(rank, T, a);
    std::vector<__nv_bfloat16> xb(in.x.size());
    for (size_t i = 0; i < xb.size(); ++i) xb[i] = __float2bfloat16(in.x[i]);
    void *dx, *dout;
    int32_t* dids;
    float* dw;
    EP_CUDA(cudaMalloc(&dx, xb.size() * 2));
    EP_CUDA(cudaMalloc(&dout, xb.size() * 2));
    EP_CUDA(cudaMalloc(&dids, in.ids.size() * 4));
    EP_CUDA(cudaMalloc(&dw, in.w.size() * 4));
    EP_CUDA(cudaMemcpy(dx, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
    EP_CUDA(cudaMemcpy(dids, in.ids.data(), in.ids.size() * 4, cudaMemcpyHostToDevice));
    EP_CUDA(cudaMemcpy(dw, in.w.data(), in.w.size() * 4, cudaMemcpyHostToDevice));
    for (const char* mode : {"high-throughput", "low-latency"}) {
      const bool ll = std::string(mode) == "low-latency";
      if (ll && T > c.max_tokens_ll) continue;
      std::vector<double> td, tc;
      double recv_rows = 0, wire = 0;
      for (int it = 0; it < a.warmup + a.iters; ++it) {
        EP_CUDA(cudaEventRecord(e0, s));
        if (ll) {
          LlRows r = b.dispatchLl(dx, dids, T, s);
          EP_CUDA(cudaEventRecord(e1, s));
          launchScaleRows(r.xs, r.ys, nullptr, r.counts, r.cap, b.localToGlobal(), dscale, Le, a.hidden, Le * r.cap, s);
          EP_CUDA(cudaEventRecord(e2, s));  // combine starts after the test expert
          b.combineLl(dids, dw, dout, s);
          if (it == 0) {
            std::vector<int> cnt(Le);
            EP_CUDA(cudaMemcpyAsync(cnt.data(), r.counts, Le * 4, cudaMemcpyDeviceToHost, s));
            EP_CUDA(cudaStreamSynchronize(s));
            for (int v : cnt) recv_rows += v;
            wire = double(a.gpus) * Le * c.max_tokens_ll * a.hidden * 2;
          }
        } else {
          HtRows r = b.dispatchHt(dx, dids, dw, T, s);
          EP_CUDA(cudaEventRecord(e1, s));
          launchScaleRows(r.xs, r.ys, r.offsets, nullptr, 0, b.localToGlobal(), dscale, Le, a.hidden, r.max_rows, s);
          EP_CUDA(cudaEventRecord(e2, s));
          b.combineHt(dout, s);
          recv_rows = r.num_recv_tokens;
          wire = recv_rows * a.hidden * 2;
        }
        cudaEvent_t e3;
        EP_CUDA(cudaEventCreate(&e3));
        EP_CUDA(cudaEventRecord(e3, s));
        EP_CUDA(cudaEventSynchronize(e3));
        float d_ms, c_ms;
        EP_CUDA(cudaEventElapsedTime(&d_ms, e0, e1));
        EP_CUDA(cudaEventElapsedTime(&c_ms, e2, e3));
        EP_CUDA(cudaEventDestroy(e3));
        if (it >= a.warmup) {
          td.push_back(d_ms * 1e3);
          tc.push_back(c_ms * 1e3);
        }
      }
      // Check the last round trip: out[t] = sum_j w * bf16(scale[e] * x[t]) (bf16 partials: loose bound).
      std::vector<__nv_bfloat16> ob(xb.size());
      EP_CUDA(cudaMemcpy(ob.data(), dout, ob.size() * 2, cudaMemcpyDeviceToHost));
      double max_err = 0;
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < a.hidden; ++h) {
          double ref = 0;
          for (int j = 0; j < a.topk; ++j) ref += in.w[size_t(t) * a.topk + j] * bf(scale[in.ids[size_t(t) * a.topk + j]] * in.x[size_t(t) * a.hidden + h]);
          max_err = std::max(max_err, std::fabs(ref - __bfloat162float(ob[size_t(t) * a.hidden + h])) / (1 + std::fabs(ref)));
        }
      }
      rows.push_back({mode, T, rank, median(td), median(tc), recv_rows * a.hidden * 2, wire, max_err});
    }
    cudaFree(dx);
    cudaFree(dout);
    cudaFree(dids);
    cudaFree(dw);
  }
  cudaStreamDestroy(s);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    int n = 0;
    EP_CUDA(cudaGetDeviceCount(&n));
    EP_CHECK(a.gpus >= 1 && a.gpus <= n, "--gpus exceeds the GPUs present");
    EP_CHECK(a.experts % a.gpus == 0, "--experts must divide over --gpus");
    const auto id = ncclUniqueIdBytes();
    std::vector<std::vector<Row>> rows(a.gpus);
    std::vector<std::string> errors(a.gpus);
    std::vector<std::thread> th;
    for (int r = 0; r < a.gpus; ++r)
      th.emplace_back([&, r] {
        try {
          rankMain(r, a, id, rows[r]);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : th) t.join();
    for (int r = 0; r < a.gpus; ++r) EP_CHECK(errors[r].empty(), "rank " + std::to_string(r) + ": " + errors[r]);
    FILE* f = a.json.empty() ? nullptr : std::fopen(a.json.c_str(), "w");
    if (f) std::fprintf(f, "{\"gpus\":%d,\"hidden\":%d,\"experts\":%d,\"topk\":%d,\"rows\":[", a.gpus, a.hidden, a.experts, a.topk);
    bool first = true, ok = true;
    std::printf("%-16s %6s %4s %12s %12s %10s %10s %10s\n", "mode", "T", "rank", "dispatch_us", "combine_us", "disp_GB/s", "comb_GB/s", "max_err");
    for (auto& rr : rows)
      for (auto& x : rr) {
        const double gd = x.bytes / (x.dispatch_us * 1e3), gc = x.bytes / (x.combine_us * 1e3);
        std::printf("%-16s %6d %4d %12.1f %12.1f %10.1f %10.1f %10.2e\n", x.mode.c_str(), x.tokens, x.rank, x.dispatch_us, x.combine_us, gd, gc, x.max_err);
        if (x.max_err > 2e-2) ok = false;
        if (f)
          std::fprintf(f, "%s{\"mode\":\"%s\",\"tokens\":%d,\"rank\":%d,\"dispatch_us\":%.2f,\"combine_us\":%.2f,\"bytes\":%.0f,\"wire_bytes\":%.0f,\"dispatch_GBps\":%.2f,\"combine_GBps\":%.2f,\"max_rel_err\":%.3e}",
                       first ? "" : ",", x.mode.c_str(), x.tokens, x.rank, x.dispatch_us, x.combine_us, x.bytes, x.wire_bytes, gd, gc, x.max_err);
        first = false;
      }
    if (f) {
      std::fprintf(f, "],\"check_ok\":%s}\n", ok ? "true" : "false");
      std::fclose(f);
    }
    if (!ok) {
      std::fprintf(stderr, "round-trip check FAILED (max relative error > 2e-2)\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ep_bench: %s\n", e.what());
    return 2;
  }
}
