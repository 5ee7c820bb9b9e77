// Dispatch/combine bandwidth and latency of native-ep's backends on one multi-GPU host: one thread per GPU, one rank each,
// communicators from one ncclGetUniqueId. Every configuration checks its round trips against a host reference
// (expert e := scale[e] * row) on the first and the last timed iteration; iterations alternate between two input sets
// (different tokens and routing), so a rank that read a previous exchange's rows fails the check.
//
//   ep_bench --backend nccl|p2p [--ll-wire capacity|tokens] [--uneven 1] --gpus 8 --hidden 7168 --experts 256 --topk 8 --tokens 128,4096 --iters 30 --json out.json
//
// Backends: nccl (ep_nccl.cpp: grouped ncclSend/ncclRecv; --ll-wire tokens: its token-sized low-latency exchange),
// p2p (ep_p2p.cpp: NVLink peer writes from kernels).
// Figures, per rank, median over iterations (CUDA events around each call on the rank's stream):
//   bytes: received tokens (high-throughput) or rows (low-latency) * H * 2 (bf16), self included: the quantity
//     DeepEP's published NVL bandwidth counts; remote_bytes: the same from other ranks only (what crossed NVLink).
//   dispatch includes layout, send, receive and the expansion into per-expert rows (high-throughput) and, for nccl,
//     the count exchange and host sync; combine includes the reductions.
//   *_arrive_us: from the call's start until its rows have arrived (EpProbe: dispatch before the expansion into
//     per-expert rows, combine before the source's final sum); *_arrive_remote_GBps = remote_bytes over that time,
//     the figure to hold against the NVLink link rate.
//   wire_bytes: what the backend moved per rank (nccl low-latency moves whole capacity regions).
// Exit status: 0 ok, 1 a round trip exceeded the error bound (or was not finite), 2 an error.
// Legend: T tokens per rank, H hidden, E experts, k top-k, N ranks.
#include <cuda_bf16.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <condition_variable>
#include <mutex>
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
  std::string json, backend = "nccl";
  std::string ll_wire = "capacity";  // nccl backend's low-latency wire: capacity (as first measured) or tokens
  bool uneven = false;  // rank r takes T * r / (N - 1) tokens (rank 0 none): zero-token ranks and unequal shares
};

// Tokens of `rank` in a configuration of T tokens per rank.
int tokensOf(int rank, int T, const Args& a) { return a.uneven && a.gpus > 1 ? int(int64_t(T) * rank / (a.gpus - 1)) : T; }

struct Row {
  std::string mode;
  int tokens, rank_tokens, rank;
  double dispatch_us, combine_us, dispatch_arrive_us, combine_arrive_us, bytes, remote_bytes, wire_bytes, combine_wire_bytes, max_err;
};

// Host threads of the ranks meet here (between configurations, before freeing buffers that peers may map).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> l(m_);
    if (broken_) throw std::runtime_error("another rank failed");
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return gen_ != gen || broken_; });
      if (gen_ == gen) throw std::runtime_error("another rank failed");
    }
  }
  // A failed rank releases the others (their next wait throws) instead of leaving them blocked.
  void abort() {
    std::lock_guard<std::mutex> l(m_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
  bool broken_ = false;
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
    else if (k == "--backend") a.backend = v;
    else if (k == "--uneven") a.uneven = v == "1";
    else if (k == "--ll-wire") a.ll_wire = v;
    else if (k == "--tokens") {
      a.tokens.clear();
      for (size_t p = 0; p < v.size();) {
        const size_t q = v.find(',', p);
        a.tokens.push_back(std::stoi(v.substr(p, q - p)));
        p = q == std::string::npos ? v.size() : q + 1;
      }
    } else throw std::runtime_error("unknown flag " + k);
  }
  if (a.backend != "nccl" && a.backend != "p2p") throw std::runtime_error("--backend must be nccl or p2p");
  if (a.ll_wire != "capacity" && a.ll_wire != "tokens") throw std::runtime_error("--ll-wire must be capacity or tokens");
  if (a.ll_wire == "tokens" && a.backend != "nccl") throw std::runtime_error("--ll-wire applies to --backend nccl only");
  if (a.tokens.empty()) throw std::runtime_error("--tokens needs at least one count");
  for (int t : a.tokens)
    if (t < 0) throw std::runtime_error("--tokens must not be negative");
  if (a.iters < 2 || a.hidden % 8 != 0 || a.topk < 1 || a.topk > 32 || a.topk > a.experts)
    throw std::runtime_error("need --iters >= 2, --hidden % 8 == 0, 1 <= --topk <= min(32, --experts)");
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

float bf(float f) { return __bfloat162float(__float2bfloat16(f)); }

// One rank's inputs, seeded by (rank, T, variant) so any rank can rebuild any other's routing. Tokens and routing
// come from separate generators (routing without the tokens is cheap).
struct Inputs {
  std::vector<float> x, w;
  std::vector<int32_t> ids;
};
std::vector<int32_t> makeIds(int rank, int T, int variant, const Args& a, std::vector<float>* w) {
  std::mt19937 g(7919u * (1000u * rank + T) + 104729u * variant + 17u);
  std::uniform_real_distribution<float> pw(0.05f, 1.f);
  std::uniform_int_distribution<int> pe(0, a.experts - 1);
  std::vector<int32_t> ids(size_t(T) * a.topk);
  if (w) w->resize(ids.size());
  for (int t = 0; t < T; ++t) {
    int32_t* row = &ids[size_t(t) * a.topk];
    for (int j = 0; j < a.topk; ++j) {
      int e;
      do { e = pe(g); } while (std::find(row, row + j, e) != row + j);
      row[j] = e;
      const float wj = pw(g);
      if (w) (*w)[size_t(t) * a.topk + j] = wj;
    }
  }
  return ids;
}
Inputs makeInputs(int rank, int T, int variant, const Args& a) {
  std::mt19937 g(1000 * rank + T + 7777 * variant);
  std::uniform_real_distribution<float> u(-1, 1);
  Inputs in;
  in.x.resize(size_t(T) * a.hidden);
  for (auto& v : in.x) v = bf(u(g));
  in.ids = makeIds(rank, T, variant, a, &in.w);
  return in;
}

// What `rank` receives (contiguous placement, Le experts per rank): tokens once per rank (high-throughput) or
// one row per slot (low-latency), from every source and from the other ranks only.
struct Received {
  double tokens = 0, tokens_remote = 0, rows = 0, rows_remote = 0;
};
Received received(int rank, int T, int variant, const Args& a) {
  const int Le = a.experts / a.gpus;
  Received r;
  for (int src = 0; src < a.gpus; ++src) {
    const int Ts = tokensOf(src, T, a);
    const std::vector<int32_t> ids = makeIds(src, Ts, variant, a, nullptr);
    for (int t = 0; t < Ts; ++t) {
      int here = 0;
      for (int j = 0; j < a.topk; ++j) here += ids[size_t(t) * a.topk + j] / Le == rank;
      r.tokens += here > 0;
      r.rows += here;
      if (src != rank) {
        r.tokens_remote += here > 0;
        r.rows_remote += here;
      }
    }
  }
  return r;
}

constexpr double kMaxRelErr = 2e-2;  // bf16 rows and bf16 partials: a loose bound

// Largest relative error of out against the host reference out[t] = sum_j w * bf16(scale[e] * x[t]); not finite
// anywhere -> infinity. The first element over the bound is described in *where (for the log).
double checkRoundTrip(const Inputs& in, const std::vector<float>& scale, const std::vector<__nv_bfloat16>& out, int T,
                      const Args& a, std::string* where) {
  double max_err = 0;
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < a.hidden; ++h) {
      double ref = 0;
      for (int j = 0; j < a.topk; ++j)
        ref += in.w[size_t(t) * a.topk + j] * bf(scale[in.ids[size_t(t) * a.topk + j]] * in.x[size_t(t) * a.hidden + h]);
      const double got = __bfloat162float(out[size_t(t) * a.hidden + h]);
      const double err = std::isfinite(got) ? std::fabs(ref - got) / (1 + std::fabs(ref)) : INFINITY;
      if (!(err <= kMaxRelErr) && where->empty()) {
        std::string experts;
        for (int j = 0; j < a.topk; ++j) experts += (j ? "," : "") + std::to_string(in.ids[size_t(t) * a.topk + j]);
        *where = "token " + std::to_string(t) + " h " + std::to_string(h) + ": got " + std::to_string(got) + ", expected " +
                 std::to_string(ref) + " (experts " + experts + ")";
      }
      max_err = std::max(max_err, err);
    }
  }
  return max_err;
}

void rankMain(int rank, const Args& a, const std::vector<uint8_t>& id, Barrier& barrier, std::vector<Row>& rows) {
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
  c.ll_wire_tokens = a.ll_wire == "tokens";
  const int Le = a.experts / a.gpus;
  for (int r = 0; r < a.gpus; ++r) {
    c.placement.emplace_back();
    for (int i = 0; i < Le; ++i) c.placement.back().push_back(r * Le + i);
  }
  auto nccl = createNcclBackend(c, id.data());
  std::unique_ptr<EpBackend> p2p;
  if (a.backend == "p2p") p2p = createP2pBackend(c, *nccl);
  EpBackend& b = p2p ? *p2p : *nccl;
  cudaStream_t s;
  EP_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<float> scale(a.experts);
  for (int e = 0; e < a.experts; ++e) scale[e] = 0.5f + 0.01f * e;
  // Every device buffer is allocated before the first exchange and freed after the last (cudaFree may wait on
  // peers' work while a peer waits for this rank's next send).
  const size_t Tmax = c.max_tokens_ht;
  float* dscale;
  void *dx[2], *dout;
  int32_t* dids[2];
  float* dw[2];
  EP_CUDA(cudaMalloc(&dscale, scale.size() * 4));
  EP_CUDA(cudaMemcpy(dscale, scale.data(), scale.size() * 4, cudaMemcpyHostToDevice));
  EP_CUDA(cudaMalloc(&dout, Tmax * a.hidden * 2));
  for (int v = 0; v < 2; ++v) {
    EP_CUDA(cudaMalloc(&dx[v], Tmax * a.hidden * 2));
    EP_CUDA(cudaMalloc(&dids[v], Tmax * a.topk * 4));
    EP_CUDA(cudaMalloc(&dw[v], Tmax * a.topk * 4));
  }
  cudaEvent_t e0, e1, e2, e3, pd, pc;
  for (cudaEvent_t* e : {&e0, &e1, &e2, &e3, &pd, &pc}) EP_CUDA(cudaEventCreate(e));
  b.setProbe({pd, pc});

  for (int Tcfg : a.tokens) {
    const int T = tokensOf(rank, Tcfg, a);  // this rank's tokens
    Inputs in[2] = {makeInputs(rank, T, 0, a), makeInputs(rank, T, 1, a)};
    const Received got[2] = {received(rank, Tcfg, 0, a), received(rank, Tcfg, 1, a)};
    for (int v = 0; v < 2; ++v) {
      std::vector<__nv_bfloat16> xb(in[v].x.size());
      for (size_t i = 0; i < xb.size(); ++i) xb[i] = __float2bfloat16(in[v].x[i]);
      EP_CUDA(cudaMemcpy(dx[v], xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
      EP_CUDA(cudaMemcpy(dids[v], in[v].ids.data(), in[v].ids.size() * 4, cudaMemcpyHostToDevice));
      EP_CUDA(cudaMemcpy(dw[v], in[v].w.data(), in[v].w.size() * 4, cudaMemcpyHostToDevice));
    }
    for (const char* mode : {"high-throughput", "low-latency"}) {
      const bool ll = std::string(mode) == "low-latency";
      if (ll && Tcfg > c.max_tokens_ll) continue;
      barrier.wait();
      std::vector<double> td, tc, tpd, tpc;
      double max_err = 0;
      const int total = a.warmup + a.iters;
      for (int it = 0; it < total; ++it) {
        const int v = it % 2;
        EP_CUDA(cudaEventRecord(e0, s));
        if (ll) {
          LlRows r = b.dispatchLl(dx[v], dids[v], T, s);
          EP_CUDA(cudaEventRecord(e1, s));
          launchScaleRows(r.xs, r.ys, nullptr, r.counts, r.cap, b.localToGlobal(), dscale, Le, a.hidden, Le * r.cap, s);
          EP_CUDA(cudaEventRecord(e2, s));  // combine starts after the test expert
          b.combineLl(dids[v], dw[v], dout, s);
        } else {
          HtRows r = b.dispatchHt(dx[v], dids[v], dw[v], T, s);
          EP_CUDA(cudaEventRecord(e1, s));
          launchScaleRows(r.xs, r.ys, r.offsets, nullptr, 0, b.localToGlobal(), dscale, Le, a.hidden, r.max_rows, s);
          EP_CUDA(cudaEventRecord(e2, s));
          b.combineHt(dout, s);
          EP_CHECK(r.num_recv_tokens == int(got[v].tokens), "received " + std::to_string(r.num_recv_tokens) + " tokens, expected " +
                                                                 std::to_string(int(got[v].tokens)));
        }
        EP_CUDA(cudaEventRecord(e3, s));
        EP_CUDA(cudaEventSynchronize(e3));
        float d_ms, c_ms, pd_ms, pc_ms;
        EP_CUDA(cudaEventElapsedTime(&d_ms, e0, e1));
        EP_CUDA(cudaEventElapsedTime(&c_ms, e2, e3));
        EP_CUDA(cudaEventElapsedTime(&pd_ms, e0, pd));
        EP_CUDA(cudaEventElapsedTime(&pc_ms, e2, pc));
        if (it >= a.warmup) {
          td.push_back(d_ms * 1e3);
          tc.push_back(c_ms * 1e3);
          tpd.push_back(pd_ms * 1e3);
          tpc.push_back(pc_ms * 1e3);
        }
        if (it == 0 || it == total - 1) {  // bf16 partials: loose bound
          std::vector<__nv_bfloat16> ob(size_t(T) * a.hidden);
          EP_CUDA(cudaMemcpy(ob.data(), dout, ob.size() * 2, cudaMemcpyDeviceToHost));
          std::string where;
          max_err = std::max(max_err, checkRoundTrip(in[v], scale, ob, T, a, &where));
          if (!where.empty())
            std::fprintf(stderr, "rank %d %s T=%d iteration %d (input set %d): wrong result at %s\n", rank, mode, T, it, v,
                         where.c_str());
        }
      }
      const double recv = ll ? (got[0].rows + got[1].rows) / 2 : (got[0].tokens + got[1].tokens) / 2;
      const double remote = ll ? (got[0].rows_remote + got[1].rows_remote) / 2 : (got[0].tokens_remote + got[1].tokens_remote) / 2;
      // What the backend moves per rank and call (the nccl low-latency regions are fixed-size).
      double wire = recv * a.hidden * 2, combine_wire = wire;
      if (ll && a.backend == "nccl" && !c.ll_wire_tokens) wire = combine_wire = double(a.gpus) * Le * c.max_tokens_ll * a.hidden * 2;
      if (ll && a.backend == "nccl" && c.ll_wire_tokens) {
        wire = double(a.gpus) * c.max_tokens_ll * a.hidden * 2;
        combine_wire = wire * a.topk;
      }
      rows.push_back({mode, Tcfg, T, rank, median(td), median(tc), median(tpd), median(tpc), recv * a.hidden * 2, remote * a.hidden * 2,
                      wire, combine_wire, max_err});
    }
  }
  barrier.wait();
  EP_CUDA(cudaStreamSynchronize(s));
  barrier.wait();
  cudaFree(dscale);
  cudaFree(dout);
  for (int v = 0; v < 2; ++v) {
    cudaFree(dx[v]);
    cudaFree(dids[v]);
    cudaFree(dw[v]);
  }
  cudaStreamDestroy(s);
  barrier.wait();  // backends are destroyed (and their buffers unmapped) only after every rank is done
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
    Barrier barrier(a.gpus);
    std::vector<std::thread> th;
    for (int r = 0; r < a.gpus; ++r)
      th.emplace_back([&, r] {
        try {
          rankMain(r, a, id, barrier, rows[r]);
        } catch (const std::exception& e) {
          errors[r] = e.what();
          barrier.abort();
        }
      });
    for (auto& t : th) t.join();
    for (int r = 0; r < a.gpus; ++r) EP_CHECK(errors[r].empty(), "rank " + std::to_string(r) + ": " + errors[r]);
    FILE* f = a.json.empty() ? nullptr : std::fopen(a.json.c_str(), "w");
    if (f)
      std::fprintf(f, "{\"backend\":\"%s\",\"ll_wire\":\"%s\",\"uneven\":%s,\"gpus\":%d,\"hidden\":%d,\"experts\":%d,\"topk\":%d,\"rows\":[", a.backend.c_str(), a.ll_wire.c_str(), a.uneven ? "true" : "false", a.gpus,
                   a.hidden, a.experts, a.topk);
    bool first = true, ok = true;
    std::printf("backend %s (low-latency wire: %s), %d GPUs, H %d, E %d, top-%d (GB/s: all received bytes; *_nvl: NVLink-only bytes)\n",
                a.backend.c_str(), a.backend == "nccl" ? a.ll_wire.c_str() : "rows", a.gpus, a.hidden, a.experts, a.topk);
    std::printf("%-16s %6s %4s %11s %11s %9s %9s %9s %9s %9s %9s %9s\n", "mode", "T", "rank", "dispatch_us", "combine_us", "disp_GB/s",
                "comb_GB/s", "d_arr_us", "c_arr_us", "d_arr_nvl", "c_arr_nvl", "max_err");
    for (auto& rr : rows)
      for (auto& x : rr) {
        const double gd = x.bytes / (x.dispatch_us * 1e3), gc = x.bytes / (x.combine_us * 1e3);
        const double rd = x.remote_bytes / (x.dispatch_us * 1e3), rc = x.remote_bytes / (x.combine_us * 1e3);
        const double ad = x.remote_bytes / (x.dispatch_arrive_us * 1e3), ac = x.remote_bytes / (x.combine_arrive_us * 1e3);
        std::printf("%-16s %6d %4d %11.1f %11.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.2e\n", x.mode.c_str(), x.tokens, x.rank,
                    x.dispatch_us, x.combine_us, gd, gc, x.dispatch_arrive_us, x.combine_arrive_us, ad, ac, x.max_err);
        if (!(x.max_err <= kMaxRelErr)) ok = false;
        if (f)
          std::fprintf(f,
                       "%s{\"mode\":\"%s\",\"tokens\":%d,\"rank_tokens\":%d,\"rank\":%d,\"dispatch_us\":%.2f,\"combine_us\":%.2f,\"bytes\":%.0f,"
                       "\"remote_bytes\":%.0f,\"wire_bytes\":%.0f,\"combine_wire_bytes\":%.0f,\"dispatch_GBps\":%.2f,\"combine_GBps\":%.2f,"
                       "\"dispatch_remote_GBps\":%.2f,\"combine_remote_GBps\":%.2f,\"dispatch_arrive_us\":%.2f,\"combine_arrive_us\":%.2f,"
                       "\"dispatch_arrive_remote_GBps\":%.2f,\"combine_arrive_remote_GBps\":%.2f,\"max_rel_err\":%.3e}",
                       first ? "" : ",", x.mode.c_str(), x.tokens, x.rank_tokens, x.rank, x.dispatch_us, x.combine_us, x.bytes, x.remote_bytes,
                       x.wire_bytes, x.combine_wire_bytes, gd, gc, rd, rc, x.dispatch_arrive_us, x.combine_arrive_us, ad, ac, x.max_err);
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
