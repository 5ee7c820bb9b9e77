// Correctness and speed of the paged attention kernels on the GPU (built and run by
// attention-check.sh): the per-head kernel (attention_per_head) and the flash-decoding kernel
// (attention_decode) with both of its merges, split-K (DecodeMerge::kWorkspace) and the thread-block
// cluster (DecodeMerge::kCluster; "cl" column: its cluster size, "-" where it leaves the step to
// split-K), on random bf16 paged K/V with scrambled block tables (block size 16), against an fp64
// CPU reference on the same bf16 values, and timed with CUDA events.
//
//   attention_check --part 1|2|3|4|5|all [--iters N]
//
// Rows: decode steps (T sequences, one token each at the end of its sequence; lengths vary a
// little between sequences) and prefill chunks (T consecutive tokens of one sequence), T 1..64,
// contexts 1..4096, GQA 32/4 (part 1) and 16/16 (part 2), D 128 and 64, window off and 200;
// part 3: odd shapes (D 8, 72, 96, 256; G 3 and 16), the cluster path's edges (contexts not a
// multiple of the split, a last split of 1 key, a context ending mid-block, windows, chunks of
// T > 1, the 8-warp kernel's serial warp merge at G 16 / D 128 and G 8 / D 256), attention()'s
// dispatch (T > 64 goes to the per-head kernel), CUDA graph replays of both merges (bit-exact
// against the eager run), the split-K path's refusal to grow its workspace inside a capture and the
// cluster path's capture on a fresh stream; part 4: split-K vs cluster in graph replay at T 1, 4,
// 16, 64 and 1, 512, 1,024, 4,096 keys (GQA 32/4, D 128), 5x the launches per graph; part 5: the
// decode kernel with qkv_post folded in (attention_decode_qkv) against qkv_post + attention_decode:
// cache rows bit for bit, outputs against fp64, graph replays, and both timed in graph replay
// (attention_check_qkv.cuh).
// An element passes when |out - ref| <= 4e-3 + 2e-2 |ref|. Times: median of --iters launches,
// each after a 256 MB memset that evicts the 60 MB L2 ("cold"), and the mean of back-to-back
// launches replayed from one CUDA graph ("hot": no host overhead, K/V partly in L2). GB/s counts the K+V bytes an ideal kernel reads once
// (each sequence's attended keys x Hkv x D x 2 tensors x 2 bytes).
// Exit status: 0 all rows pass, 1 a mismatch, 2 a CUDA or setup error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "attention_decode.cuh"
#include "check.h"
#include "harness.cuh"
#include "ops.h"

using namespace dcuda;
using harness::bf16_to_float;
using harness::fill_uniform_bf16;

namespace {

constexpr int kBlock = 16;
constexpr float kAtol = 4e-3f, kRtol = 2e-2f;

struct Case {
  const char* kind;  // "decode" | "chunk"
  int T, ctx, Hq, Hkv, D, window;
  const char* path;  // "both": old and new kernels; "entry": attention() only (its dispatch)
};

struct Inputs {
  int S = 0, blocks = 0, stride = 0, ldq = 0;
  std::vector<int32_t> pos, tok_seq, tables;
  std::vector<float> q;
  std::vector<uint16_t> k, v;  // host copies of the caches (bf16 bits)
  size_t cache_elems = 0, kv_bytes = 0;
  bf16 *dk = nullptr, *dv = nullptr, *dout = nullptr;
  float* dq = nullptr;
  int32_t *dpos = nullptr, *dseq = nullptr, *dtables = nullptr;
  AttentionArgs args{};
};

void build(const Case& c, uint64_t seed, Inputs& in) {
  std::mt19937 rng{uint32_t(seed)};
  const bool chunk = std::strcmp(c.kind, "chunk") == 0;
  const int T = c.T;
  in.S = chunk ? 1 : T;
  std::vector<int> len(in.S);
  for (int s = 0; s < in.S; ++s) {
    // decode: lengths ctx, ctx - 7, ctx - 14, ... (at least 1) so splits differ between sequences
    len[s] = chunk ? std::max(c.ctx, T) : std::max(1, c.ctx - (s % 4) * 7);
  }
  int max_blocks = 0;
  for (int s = 0; s < in.S; ++s) max_blocks = std::max(max_blocks, (len[s] + kBlock - 1) / kBlock);
  in.stride = max_blocks + 1;
  in.blocks = 0;
  for (int s = 0; s < in.S; ++s) in.blocks += (len[s] + kBlock - 1) / kBlock;
  in.blocks += 3;  // spare blocks nobody owns
  std::vector<int32_t> perm(in.blocks);
  for (int i = 0; i < in.blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  in.tables.assign(size_t(in.S) * in.stride, 0);
  int next = 0;
  for (int s = 0; s < in.S; ++s)
    for (int b = 0; b < (len[s] + kBlock - 1) / kBlock; ++b) in.tables[size_t(s) * in.stride + b] = perm[next++];
  in.pos.resize(T), in.tok_seq.resize(T);
  for (int t = 0; t < T; ++t) {
    in.tok_seq[t] = chunk ? 0 : t;
    in.pos[t] = chunk ? len[0] - T + t : len[t] - 1;
  }
  in.ldq = (c.Hq + 2 * c.Hkv) * c.D;  // q inside the fused qkv row, as the model passes it
  in.q.resize(size_t(T) * in.ldq);
  std::uniform_real_distribution<float> uq(-3.f, 3.f);
  for (float& x : in.q) x = uq(rng);
  in.kv_bytes = 0;
  for (int s = 0; s < in.S; ++s) {
    const int hi = chunk ? in.pos[T - 1] : in.pos[s];
    const int lo0 = chunk ? in.pos[0] : in.pos[s];
    const int lo = c.window > 0 ? std::max(0, lo0 - c.window + 1) : 0;
    in.kv_bytes += size_t(hi - lo + 1) * c.Hkv * c.D * 2 * 2;
  }

  in.cache_elems = size_t(in.blocks) * kBlock * c.Hkv * c.D;
  DC_CUDA(cudaMalloc(&in.dk, in.cache_elems * 2));
  DC_CUDA(cudaMalloc(&in.dv, in.cache_elems * 2));
  DC_CUDA(cudaMalloc(&in.dout, size_t(T) * c.Hq * c.D * 2));
  DC_CUDA(cudaMalloc(&in.dq, in.q.size() * 4));
  DC_CUDA(cudaMalloc(&in.dpos, size_t(T) * 4));
  DC_CUDA(cudaMalloc(&in.dseq, size_t(T) * 4));
  DC_CUDA(cudaMalloc(&in.dtables, in.tables.size() * 4));
  fill_uniform_bf16<<<1024, 256>>>(in.dk, in.cache_elems, seed * 2 + 1);
  fill_uniform_bf16<<<1024, 256>>>(in.dv, in.cache_elems, seed * 2 + 2);
  DC_LAUNCHED();
  in.k.resize(in.cache_elems), in.v.resize(in.cache_elems);
  DC_CUDA(cudaMemcpy(in.k.data(), in.dk, in.cache_elems * 2, cudaMemcpyDeviceToHost));
  DC_CUDA(cudaMemcpy(in.v.data(), in.dv, in.cache_elems * 2, cudaMemcpyDeviceToHost));
  DC_CUDA(cudaMemcpy(in.dq, in.q.data(), in.q.size() * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dpos, in.pos.data(), size_t(T) * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dseq, in.tok_seq.data(), size_t(T) * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dtables, in.tables.data(), in.tables.size() * 4, cudaMemcpyHostToDevice));

  AttentionArgs& a = in.args;
  a.q = in.dq, a.ldq = in.ldq, a.k_cache = in.dk, a.v_cache = in.dv, a.pos = in.dpos, a.tok_seq = in.dseq;
  a.tables = in.dtables, a.table_stride = in.stride, a.T = T, a.B = kBlock, a.Hq = c.Hq, a.Hkv = c.Hkv, a.D = c.D;
  a.scale = 1.f / std::sqrt(float(c.D)), a.window = c.window, a.out = in.dout;
}

void release(Inputs& in) {
  cudaFree(in.dk), cudaFree(in.dv), cudaFree(in.dout), cudaFree(in.dq);
  cudaFree(in.dpos), cudaFree(in.dseq), cudaFree(in.dtables);
}

// out [T, Hq * D] in fp64 over the bf16 cache values and the fp32 queries.
std::vector<double> reference(const Case& c, const Inputs& in) {
  const int T = c.T;
  std::vector<double> out(size_t(T) * c.Hq * c.D);
  auto run = [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) {
      const int pos = in.pos[t];
      const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
      const int32_t* table = in.tables.data() + size_t(in.tok_seq[t]) * in.stride;
      harness::attention_reference_row(in.q.data() + size_t(t) * in.ldq, pos, lo, table, in.k, in.v, kBlock, c.Hq, c.Hkv,
                                       c.D, out.data() + size_t(t) * c.Hq * c.D);
    }
  };
  const int n = std::max(1, std::min(T, int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) pool.emplace_back(run, T * i / n, T * (i + 1) / n);
  for (auto& th : pool) th.join();
  return out;
}

// Largest |out - ref| and whether every element is within tolerance (NaN fails).
std::pair<double, bool> compare(const Inputs& in, const Case& c, const std::vector<double>& ref) {
  std::vector<uint16_t> out(ref.size());
  DC_CUDA(cudaMemcpy(out.data(), in.dout, out.size() * 2, cudaMemcpyDeviceToHost));
  harness::Tally tally;
  for (size_t i = 0; i < ref.size(); ++i) tally.add(bf16_to_float(out[i]), ref[i], kAtol, kRtol);
  (void)c;
  return {tally.worst, tally.ok};
}

using Launcher = void (*)(const AttentionArgs&, cudaStream_t);

void run_split_k(const AttentionArgs& a, cudaStream_t s) { attention_decode(a, s, DecodeMerge::kWorkspace); }
void run_cluster(const AttentionArgs& a, cudaStream_t s) { attention_decode(a, s, DecodeMerge::kCluster); }

struct Timing {
  double cold_us, hot_us;
};

Timing time_kernel(Launcher f, const AttentionArgs& a, cudaStream_t s, void* flush, size_t flush_bytes, int iters,
                   int hot_scale = 1) {
  cudaEvent_t e0, e1;
  DC_CUDA(cudaEventCreate(&e0));
  DC_CUDA(cudaEventCreate(&e1));
  const float cold_us = harness::cold_median_us([&] { f(a, s); }, flush, flush_bytes, s, iters, e0, e1);
  // hot: hot_n launches captured in one CUDA graph (as the model replays decode steps), so host
  // launch overhead is left out; the output checked after timing comes from these replays
  const int hot_n = iters * 2 * hot_scale;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DC_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < hot_n; ++i) f(a, s);
  DC_CUDA(cudaStreamEndCapture(s, &graph));
  DC_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  DC_CUDA(cudaGraphLaunch(exec, s));  // warm-up
  DC_CUDA(cudaEventRecord(e0, s));
  DC_CUDA(cudaGraphLaunch(exec, s));
  DC_CUDA(cudaEventRecord(e1, s));
  DC_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  DC_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return {cold_us, ms * 1000.0 / hot_n};
}

std::vector<Case> cases_for(int part) {
  std::vector<Case> v;
  const int Ts[] = {1, 4, 16, 64};
  const int ctxs[] = {1, 17, 512, 4096};
  const int heads[2][2] = {{32, 4}, {16, 16}};
  const int Ds[] = {128, 64};
  const int wins[] = {0, 200};
  for (int hi = 0; hi < 2; ++hi) {
    if (part != 0 && part != hi + 1) continue;
    for (int D : Ds)
      for (int w : wins)
        for (int T : Ts)
          for (int ctx : ctxs) v.push_back({"decode", T, ctx, heads[hi][0], heads[hi][1], D, w, "both"});
    for (int T : {16, 64})
      for (int ctx : {64, 600})
        for (int w : wins) v.push_back({"chunk", T, ctx, heads[hi][0], heads[hi][1], 128, w, "both"});
    // decode steps of 65-256 sequences (graphs go to 256): the decode kernel only where
    // DISPATCH_CUDA_ATTN_DECODE_MAX_TOKENS lets it take them (attention-check.sh sets 256)
    for (int T : {128, 256})
      for (int ctx : {17, 600}) v.push_back({"decode", T, ctx, heads[hi][0], heads[hi][1], 128, 0, "both"});
  }
  if (part == 0 || part == 3) {
    // odd shapes: D not a multiple of 32, D 8 and 256, G 3 and 16, blocks boundaries at 16 and 32
    v.push_back({"decode", 4, 300, 32, 4, 256, 0, "both"});
    v.push_back({"decode", 4, 300, 12, 4, 72, 0, "both"});
    v.push_back({"decode", 4, 300, 8, 8, 96, 100, "both"});
    v.push_back({"decode", 4, 300, 16, 1, 8, 0, "both"});
    v.push_back({"decode", 3, 33, 16, 1, 128, 0, "both"});
    v.push_back({"decode", 2, 32, 64, 4, 128, 16, "both"});
    v.push_back({"chunk", 33, 48, 32, 4, 128, 0, "both"});
    // the cluster path's edges (T = 1 at 32/4 runs 8 splits of >= 128 keys): 1000 keys (8 splits of
    // 128, the last of 104 ending mid-block), 129 (a second split of 1 key), 2 tokens near 1,030,
    // windows, chunks, the serial warp merge (G 16 at D 128, G 8 at D 256), D 72 (G 3), D 8
    v.push_back({"decode", 1, 1000, 32, 4, 128, 0, "both"});
    v.push_back({"decode", 1, 129, 32, 4, 128, 0, "both"});
    v.push_back({"decode", 2, 1030, 32, 4, 128, 0, "both"});
    v.push_back({"decode", 1, 2000, 32, 4, 128, 500, "both"});
    v.push_back({"decode", 1, 333, 8, 8, 96, 100, "both"});
    v.push_back({"decode", 1, 700, 16, 1, 128, 0, "both"});
    v.push_back({"decode", 1, 900, 32, 4, 256, 0, "both"});
    v.push_back({"decode", 1, 600, 12, 4, 72, 0, "both"});
    v.push_back({"decode", 1, 500, 16, 1, 8, 0, "both"});
    v.push_back({"chunk", 8, 1000, 32, 4, 128, 0, "both"});
    v.push_back({"chunk", 4, 300, 32, 4, 64, 100, "both"});
    // attention()'s dispatch: the decode kernel at T <= attention_decode_max_tokens(), the per-head kernel above
    v.push_back({"decode", 8, 700, 32, 4, 128, 0, "entry"});
    v.push_back({"chunk", 96, 500, 32, 4, 128, 0, "entry"});
    v.push_back({"chunk", 96, 500, 32, 4, 128, 64, "entry"});
  }
  if (part == 0 || part == 4) {
    for (int T : {1, 4, 16, 64})
      for (int ctx : {1, 512, 1024, 4096}) v.push_back({"decode", T, ctx, 32, 4, 128, 0, "both"});
  }
  return v;
}

// Replays of one captured launch of f must match its eager run bit for bit (split-K: the arrival
// counters reset themselves; cluster: nothing to reset); the output is poisoned before each.
bool replay_matches(Launcher f, const char* name, const Case& c, Inputs& in, cudaStream_t s) {
  const size_t out_bytes = size_t(c.T) * c.Hq * c.D * 2;
  f(in.args, s);  // eager (split-K: allocates this stream's workspace)
  DC_CUDA(cudaStreamSynchronize(s));
  std::vector<uint16_t> eager(out_bytes / 2), replay(out_bytes / 2);
  DC_CUDA(cudaMemcpy(eager.data(), in.dout, out_bytes, cudaMemcpyDeviceToHost));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DC_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  f(in.args, s);
  DC_CUDA(cudaStreamEndCapture(s, &graph));
  DC_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  bool ok = true;
  for (int i = 0; i < 5; ++i) {
    DC_CUDA(cudaMemsetAsync(in.dout, 0xff, out_bytes, s));  // NaNs unless the replay writes every element
    DC_CUDA(cudaGraphLaunch(exec, s));
    DC_CUDA(cudaStreamSynchronize(s));
    DC_CUDA(cudaMemcpy(replay.data(), in.dout, out_bytes, cudaMemcpyDeviceToHost));
    if (replay != eager) {
      std::printf("FAIL graph replay %d of the %s path differs from the eager run\n", i, name);
      ok = false;
    }
  }
  std::printf("graph: 5 replays of T=%d ctx=%d (%s path, cluster size %d) %s the eager output\n", c.T, c.ctx, name,
              attention_decode_cluster_size(in.args, s), ok ? "match" : "DO NOT match");
  cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
  return ok;
}

// Graph replays of both merges; the split-K path must refuse to grow its workspace inside a
// capture; the cluster path, which needs no workspace, must capture on a fresh stream.
bool graph_checks() {
  bool ok = true;
  const Case c{"decode", 4, 512, 32, 4, 128, 0, "both"};
  Inputs in;
  build(c, 777, in);
  cudaStream_t s;
  DC_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ok = replay_matches(run_split_k, "split-K", c, in, s) && ok;
  ok = replay_matches(run_cluster, "cluster", c, in, s) && ok;
  {
    const Case c1{"decode", 1, 1000, 32, 4, 128, 0, "both"};
    Inputs in1;
    build(c1, 778, in1);
    ok = replay_matches(run_cluster, "cluster", c1, in1, s) && ok;
    release(in1);
  }

  // a fresh stream has no workspace: capturing its first split-K step must throw, not allocate
  cudaStream_t s2;
  DC_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  DC_CUDA(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
  bool refused = false;
  try {
    run_split_k(in.args, s2);
  } catch (const CudaError& e) {
    refused = std::strstr(e.what(), "capturing") != nullptr;
    std::printf("graph: split-K workspace growth during capture refused: %s\n", e.what());
  }
  cudaGraph_t g2 = nullptr;
  cudaStreamEndCapture(s2, &g2);
  if (g2) cudaGraphDestroy(g2);
  cudaGetLastError();
  if (!refused) {
    std::printf("FAIL workspace growth inside a capture was not refused\n");
    ok = false;
  }
  cudaStreamDestroy(s2);

  // the cluster path on a fresh stream: its first step captured, no eager step before, in a head
  // shape no other row runs (so its cluster-capacity query also happens inside the capture, as a
  // model capturing a batch size it never ran eagerly does)
  const Case c3{"decode", 2, 700, 24, 2, 48, 0, "both"};
  Inputs in3;
  build(c3, 779, in3);
  cudaStream_t s3;
  DC_CUDA(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  bool captured = false;
  try {
    cudaGraph_t g3 = nullptr;
    cudaGraphExec_t e3 = nullptr;
    DC_CUDA(cudaStreamBeginCapture(s3, cudaStreamCaptureModeThreadLocal));
    run_cluster(in3.args, s3);
    DC_CUDA(cudaStreamEndCapture(s3, &g3));
    DC_CUDA(cudaGraphInstantiate(&e3, g3, 0));
    DC_CUDA(cudaMemsetAsync(in3.dout, 0xff, size_t(c3.T) * c3.Hq * c3.D * 2, s3));
    DC_CUDA(cudaGraphLaunch(e3, s3));
    DC_CUDA(cudaStreamSynchronize(s3));
    cudaGraphExecDestroy(e3), cudaGraphDestroy(g3);
    const auto [err, cmp_ok] = compare(in3, c3, reference(c3, in3));
    const int size = attention_decode_cluster_size(in3.args, s3);
    captured = cmp_ok && size > 1;
    std::printf("graph: cluster path (cluster size %d) captured on a fresh stream, replay err %.2e %s\n", size, err,
                cmp_ok ? "ok" : "MISMATCH");
  } catch (const CudaError& e) {
    std::printf("graph: cluster path capture on a fresh stream failed: %s\n", e.what());
    cudaGraph_t g3 = nullptr;
    cudaStreamEndCapture(s3, &g3);
    if (g3) cudaGraphDestroy(g3);
    cudaGetLastError();
  }
  if (!captured) {
    std::printf("FAIL the cluster path did not capture and replay correctly on a fresh stream\n");
    ok = false;
  }
  cudaStreamDestroy(s3);
  release(in3);
  cudaStreamDestroy(s);
  release(in);
  return ok;
}

}  // namespace

#include "attention_check_qkv.cuh"  // part 5: uses Case, Inputs, build and reference above

int main(int argc, char** argv) {
  int part = 0, iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--part" && i + 1 < argc) {
      const std::string p = argv[++i];
      part = p == "all" ? 0 : std::atoi(p.c_str());
    } else if (arg == "--iters" && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: attention_check [--part 1|2|3|4|5|all] [--iters N]\n");
      return 2;
    }
  }
  if (part < 0 || part > 5) {
    std::fprintf(stderr, "--part must be 1, 2, 3, 4, 5 or all\n");
    return 2;
  }
  try {
    cudaDeviceProp prop{};
    DC_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB; tolerance |err| <= %.0e + %.0e |ref|; %d cold iterations\n", prop.name,
                prop.multiProcessorCount, prop.l2CacheSize >> 20, kAtol, kRtol, iters);
    const size_t flush_bytes = size_t(256) << 20;
    void* flush = nullptr;
    DC_CUDA(cudaMalloc(&flush, flush_bytes));
    cudaStream_t s;
    DC_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // cold: median us after an L2 flush; hot: mean us per launch replayed back to back from one
    // CUDA graph (PDL on); sk/cl: split-K hot / cluster hot; cl: the cluster size ("-": split-K ran)
    std::printf("%-6s %3s %5s %6s %4s %4s %7s %2s | %8s %8s %8s | %8s %8s %8s %7s | %8s %8s %8s %s\n", "kind", "T",
                "ctx", "Hq/Hkv", "D", "win", "KV MB", "cl", "ph cold", "sk cold", "cl cold", "ph hot", "sk hot",
                "cl hot", "sk/cl", "err ph", "err sk", "err cl", "ok");
    bool all_ok = true;
    uint64_t seed = 1;
    for (const Case& c : cases_for(part)) {
      Inputs in;
      build(c, seed++, in);
      const std::vector<double> ref = reference(c, in);
      char heads[16];
      std::snprintf(heads, sizeof heads, "%d/%d", c.Hq, c.Hkv);
      if (std::strcmp(c.path, "entry") == 0) {
        DC_CUDA(cudaMemsetAsync(in.dout, 0xff, size_t(c.T) * c.Hq * c.D * 2, s));
        attention(in.args, s);
        DC_CUDA(cudaStreamSynchronize(s));
        const auto [err, ok] = compare(in, c, ref);
        const Timing tm = time_kernel(attention, in.args, s, flush, flush_bytes, iters);
        all_ok = all_ok && ok;
        std::printf("%-6s %3d %5d %6s %4d %4d %9.2f | attention() %s: %9.2f us cold, %9.2f us hot, %8.1f GB/s cold | err %9.2e %s\n",
                    c.kind, c.T, c.ctx, heads, c.D, c.window, in.kv_bytes / 1e6,
                    attention_decode_supported(in.args) ? "-> decode" : "-> per-head", tm.cold_us, tm.hot_us,
                    in.kv_bytes / tm.cold_us / 1e3, err, ok ? "ok" : "MISMATCH");
        release(in);
        continue;
      }
      // per-head, split-K and cluster: each checked on its first launch and again after its timed
      // launches (the graph replays' output)
      const Launcher fs[3] = {attention_per_head, run_split_k, run_cluster};
      const size_t out_bytes = size_t(c.T) * c.Hq * c.D * 2;
      const int hot_scale = part == 4 ? 5 : 1;
      Timing tm[3];
      double err[3];
      bool oks[3];
      for (int k = 0; k < 3; ++k) {
        DC_CUDA(cudaMemsetAsync(in.dout, 0xff, out_bytes, s));
        fs[k](in.args, s);
        DC_CUDA(cudaStreamSynchronize(s));
        const auto [e0, ok0] = compare(in, c, ref);
        tm[k] = time_kernel(fs[k], in.args, s, flush, flush_bytes, iters, hot_scale);
        const auto [e1, ok1] = compare(in, c, ref);
        err[k] = std::max(e0, e1), oks[k] = ok0 && ok1;
      }
      const bool ok = oks[0] && oks[1] && oks[2];
      all_ok = all_ok && ok;
      const int csize = attention_decode_cluster_size(in.args, s);
      char cl[8] = "-";
      if (csize > 1) std::snprintf(cl, sizeof cl, "%d", csize);
      std::printf("%-6s %3d %5d %6s %4d %4d %7.2f %2s | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f %6.2fx | %8.2e %8.2e %8.2e %s\n",
                  c.kind, c.T, c.ctx, heads, c.D, c.window, in.kv_bytes / 1e6, cl, tm[0].cold_us, tm[1].cold_us,
                  tm[2].cold_us, tm[0].hot_us, tm[1].hot_us, tm[2].hot_us, tm[1].hot_us / tm[2].hot_us, err[0], err[1],
                  err[2],
                  ok ? "ok" : !oks[0] ? "MISMATCH (per-head)" : !oks[1] ? "MISMATCH (split-K)" : "MISMATCH (cluster)");
      std::fflush(stdout);
      release(in);
    }
    if (part == 0 || part == 3) all_ok = graph_checks() && all_ok;
    if (part == 0 || part == 5) all_ok = qkv_checks(s) && all_ok;
    cudaFree(flush);
    cudaStreamDestroy(s);
    std::printf("%s\n", all_ok ? "ALL OK" : "FAILED: see MISMATCH rows");
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
