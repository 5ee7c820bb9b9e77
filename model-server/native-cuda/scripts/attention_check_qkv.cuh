// Part 5 of attention_check.cu (included there, after Case / Inputs / build / reference): the
// decode attention with qkv_post folded in (attention_decode_qkv) against qkv_post +
// attention_decode on the same raw q|k|v rows and caches.
//
// Per row (decode steps: one token per sequence, the only steps the model folds): the raw
// projection [T, (Hq + 2 Hkv) D] is uniform in [-3, 3), q_norm / k_norm weights in [0.5, 1.5),
// inv_freq = 1e6^(-2i/D). Checked:
//   - kv: every byte of the K and V caches after the fused launch equals the caches after qkv_post
//     (pristine caches restored before each launch, so each merge's writes are checked alone), and
//     the new rows are within 1e-3 + 8e-3 |ref| of the fp64 qkv_post math (bf16 rounding);
//   - out: old and fused outputs within attention_check's tolerance of the fp64 reference: q from
//     the raw rows through qkv_post's math in fp64 (fp32 angle pos * inv_freq, as the kernels),
//     attention over the caches as written; both merges (split-K, cluster) of the fused path;
//   - padding tokens (slot -1, "pad" rows) write nothing; their outputs are not compared (old
//     reads the stale cache row, fused its own fresh key);
//   - above 64 tokens (qkv_post's 4-heads-per-warp kernel, the prefill sizes' path) the caches are bounded against the
//     fp64 math as above and their bytes compared with the fused path's for the record ("kv equal" / "DIFF"), not
//     required to match;
//   - graph: 3 replays of a captured fused launch (caches restored, output poisoned) equal the
//     eager output and caches bit for bit, for both merges.
// Then qkv_post + attention_decode vs attention_decode_qkv, each launch pair / launch 100 times
// in one CUDA graph (PDL on, as the model's decode graphs), at T 1, 4, 16, 64 (GQA 32/4, D 128,
// per-head q/k norm, the Qwen3-30B-A3B shape), 512 and 4096 keys.
#pragma once
#include <tuple>
#include "fused_ops.h"

namespace {

struct QkvCase {
  int T, ctx, Hq, Hkv, D, window, qk_norm;
  float clip;
  bool padding;  // every third token slot -1
};

struct QkvRig {
  Case c;
  Inputs in;  // in.q: the raw projection (ld = in.ldq); in.dk / in.dv: the caches the old path writes
  std::vector<float> qn, kn, inv_freq;
  std::vector<int32_t> slots;
  float *d_raw = nullptr, *d_qn = nullptr, *d_kn = nullptr, *d_inv = nullptr;
  int32_t* d_slots = nullptr;
  bf16 *dk0 = nullptr, *dv0 = nullptr;  // pristine caches
  bf16 *dk1 = nullptr, *dv1 = nullptr;  // the fused path's caches
  bf16* dout1 = nullptr;                // the fused path's output
  QkvPostArgs p_old{}, p_new{};
  AttentionArgs a_new{};
};

void rig_build(const QkvCase& q, uint64_t seed, QkvRig& g) {
  g.c = Case{"decode", q.T, q.ctx, q.Hq, q.Hkv, q.D, q.window, "both"};
  build(g.c, seed, g.in);
  Inputs& in = g.in;
  std::mt19937 rng{uint32_t(seed * 7 + 3)};
  std::uniform_real_distribution<float> uw(0.5f, 1.5f);
  g.qn.resize(q.D), g.kn.resize(q.D), g.inv_freq.resize(q.D / 2);
  for (float& x : g.qn) x = uw(rng);
  for (float& x : g.kn) x = uw(rng);
  for (int i = 0; i < q.D / 2; ++i) g.inv_freq[i] = float(std::pow(1e6, -2.0 * i / q.D));
  g.slots.resize(q.T);
  for (int t = 0; t < q.T; ++t) {
    const int pos = in.pos[t];
    g.slots[t] = in.tables[size_t(in.tok_seq[t]) * in.stride + pos / kBlock] * kBlock + pos % kBlock;
    if (q.padding && t % 3 == 2) g.slots[t] = -1;
  }
  const size_t cache_bytes = in.cache_elems * 2;
  DC_CUDA(cudaMalloc(&g.d_raw, in.q.size() * 4));
  DC_CUDA(cudaMalloc(&g.d_qn, q.D * 4));
  DC_CUDA(cudaMalloc(&g.d_kn, q.D * 4));
  DC_CUDA(cudaMalloc(&g.d_inv, q.D / 2 * 4));
  DC_CUDA(cudaMalloc(&g.d_slots, q.T * 4));
  for (bf16** p : {&g.dk0, &g.dv0, &g.dk1, &g.dv1}) DC_CUDA(cudaMalloc(p, cache_bytes));
  DC_CUDA(cudaMalloc(&g.dout1, size_t(q.T) * q.Hq * q.D * 2));
  DC_CUDA(cudaMemcpy(g.d_raw, in.q.data(), in.q.size() * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(g.d_qn, g.qn.data(), q.D * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(g.d_kn, g.kn.data(), q.D * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(g.d_inv, g.inv_freq.data(), q.D / 2 * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(g.d_slots, g.slots.data(), q.T * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(g.dk0, in.dk, cache_bytes, cudaMemcpyDeviceToDevice));
  DC_CUDA(cudaMemcpy(g.dv0, in.dv, cache_bytes, cudaMemcpyDeviceToDevice));

  QkvPostArgs& p = g.p_old;
  p.qkv = in.dq, p.T = q.T, p.Hq = q.Hq, p.Hkv = q.Hkv, p.D = q.D, p.qk_norm = q.qk_norm;
  p.q_norm = q.qk_norm ? g.d_qn : nullptr, p.k_norm = q.qk_norm ? g.d_kn : nullptr;
  p.eps = 1e-6f, p.clip = q.clip, p.pos = in.dpos, p.inv_freq = g.d_inv, p.slots = g.d_slots;
  p.k_cache = in.dk, p.v_cache = in.dv;
  g.p_new = p;
  g.p_new.qkv = g.d_raw, g.p_new.k_cache = g.dk1, g.p_new.v_cache = g.dv1;
  g.a_new = in.args;
  g.a_new.q = g.d_raw, g.a_new.k_cache = g.dk1, g.a_new.v_cache = g.dv1, g.a_new.out = g.dout1;
}

void rig_release(QkvRig& g) {
  release(g.in);
  for (void* p : {(void*)g.d_raw, (void*)g.d_qn, (void*)g.d_kn, (void*)g.d_inv, (void*)g.d_slots, (void*)g.dk0,
                  (void*)g.dv0, (void*)g.dk1, (void*)g.dv1, (void*)g.dout1})
    cudaFree(p);
}

// qkv_post's math on one head row in fp64: norm (w null: none), clip, rotate-half RoPE at the fp32
// angle float(pos) * inv_freq[i] (rotate false: v, clip only).
void post_head_ref(const float* x, int D, const float* w, double eps, float clip, int pos, const float* inv_freq,
                   bool rotate, double* out) {
  double f = 1.0;
  if (w) {
    double ss = 0;
    for (int i = 0; i < D; ++i) ss += double(x[i]) * x[i];
    f = 1.0 / std::sqrt(ss / D + eps);
  }
  std::vector<double> y(D);
  for (int i = 0; i < D; ++i) {
    double v = w ? double(w[i]) * (double(x[i]) * f) : double(x[i]);
    if (clip > 0.f) v = std::min(double(clip), std::max(-double(clip), v));
    y[i] = v;
  }
  if (!rotate) {
    for (int i = 0; i < D; ++i) out[i] = y[i];
    return;
  }
  const int half = D / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = double(float(pos) * inv_freq[i]);
    const double cs = std::cos(angle), sn = std::sin(angle);
    out[i] = y[i] * cs - y[i + half] * sn;
    out[i + half] = y[i + half] * cs + y[i] * sn;
  }
}

void restore_caches(const QkvRig& g, cudaStream_t s) {
  const size_t bytes = g.in.cache_elems * 2;
  DC_CUDA(cudaMemcpyAsync(g.dk1, g.dk0, bytes, cudaMemcpyDeviceToDevice, s));
  DC_CUDA(cudaMemcpyAsync(g.dv1, g.dv0, bytes, cudaMemcpyDeviceToDevice, s));
}

std::vector<uint16_t> download(const void* p, size_t elems) {
  std::vector<uint16_t> h(elems);
  DC_CUDA(cudaMemcpy(h.data(), p, elems * 2, cudaMemcpyDeviceToHost));
  return h;
}

// Output rows of non-padding tokens against ref; NaN fails.
std::pair<double, bool> compare_rows(const bf16* dout, const QkvCase& q, const std::vector<int32_t>& slots,
                                     const std::vector<double>& ref) {
  const std::vector<uint16_t> out = download(dout, ref.size());
  const size_t row = size_t(q.Hq) * q.D;
  harness::Tally tally;
  for (int t = 0; t < q.T; ++t) {
    if (slots[t] < 0) continue;
    for (size_t i = t * row; i < (t + 1) * row; ++i) tally.add(bf16_to_float(out[i]), ref[i], kAtol, kRtol);
  }
  return {tally.worst, tally.ok};
}

bool qkv_row(const QkvCase& q, uint64_t seed, cudaStream_t s) {
  QkvRig g;
  rig_build(q, seed, g);
  Inputs& in = g.in;
  const size_t out_elems = size_t(q.T) * q.Hq * q.D;
  bool ok = attention_decode_qkv_supported(g.a_new, g.p_new);
  if (!ok) std::printf("FAIL attention_decode_qkv_supported refused a decode shape\n");

  // old: qkv_post (q rotated in place in in.dq, k / v to in.dk / in.dv) + attention_decode
  DC_CUDA(cudaMemsetAsync(in.dout, 0xff, out_elems * 2, s));
  qkv_post(g.p_old, s);
  attention_decode(in.args, s);
  DC_CUDA(cudaStreamSynchronize(s));
  const std::vector<uint16_t> k_old = download(in.dk, in.cache_elems), v_old = download(in.dv, in.cache_elems);

  // fused, each merge on pristine caches; every byte of its caches must equal the old path's
  const DecodeMerge merges[2] = {DecodeMerge::kWorkspace, DecodeMerge::kCluster};
  bool kv_equal = true;
  std::vector<uint16_t> outs[2];
  for (int m = 0; m < 2; ++m) {
    restore_caches(g, s);
    DC_CUDA(cudaMemsetAsync(g.dout1, 0xff, out_elems * 2, s));
    attention_decode_qkv(g.a_new, g.p_new, s, merges[m]);
    DC_CUDA(cudaStreamSynchronize(s));
    outs[m] = download(g.dout1, out_elems);
    if (download(g.dk1, in.cache_elems) != k_old || download(g.dv1, in.cache_elems) != v_old) {
      kv_equal = false;
      // above 64 tokens qkv_post runs its 4-heads-per-warp kernel, whose rows only the fp64 bound below decides
      if (q.T <= 64) std::printf("FAIL the %s fused path's caches differ from qkv_post's\n", m ? "cluster" : "split-K");
    }
  }

  // fp64 reference: q through qkv_post's math, attention over the caches as written (in.k / in.v)
  in.k = k_old, in.v = v_old;
  const int ld = in.ldq;
  harness::Tally kv_tally;
  std::vector<float> qref(in.q.size(), 0.f);
  std::vector<double> head(q.D);
  for (int t = 0; t < q.T; ++t) {
    const float* row = in.q.data() + size_t(t) * ld;
    const int pos = in.pos[t];
    for (int h = 0; h < q.Hq; ++h) {
      post_head_ref(row + size_t(h) * q.D, q.D, q.qk_norm ? g.qn.data() : nullptr, 1e-6, q.clip, pos,
                    g.inv_freq.data(), true, head.data());
      for (int d = 0; d < q.D; ++d) qref[size_t(t) * ld + size_t(h) * q.D + d] = float(head[d]);
    }
    if (g.slots[t] < 0) continue;
    for (int h = 0; h < q.Hkv; ++h) {  // the new rows against fp64 (bf16 rounding)
      const size_t at = size_t(g.slots[t]) * q.Hkv * q.D + size_t(h) * q.D;
      post_head_ref(row + size_t(q.Hq + h) * q.D, q.D, q.qk_norm ? g.kn.data() : nullptr, 1e-6, q.clip, pos,
                    g.inv_freq.data(), true, head.data());
      for (int d = 0; d < q.D; ++d) kv_tally.add(bf16_to_float(k_old[at + d]), head[d], 1e-3, 8e-3);
      post_head_ref(row + size_t(q.Hq + q.Hkv + h) * q.D, q.D, nullptr, 0, q.clip, pos, nullptr, false, head.data());
      for (int d = 0; d < q.D; ++d) kv_tally.add(bf16_to_float(v_old[at + d]), head[d], 1e-3, 8e-3);
    }
  }
  in.q = qref;
  const std::vector<double> ref = reference(g.c, in);
  const auto [e_old, ok_old] = compare_rows(in.dout, q, g.slots, ref);
  double e_new[2];
  bool ok_new[2];
  for (int m = 0; m < 2; ++m) {
    DC_CUDA(cudaMemcpy(g.dout1, outs[m].data(), out_elems * 2, cudaMemcpyHostToDevice));
    std::tie(e_new[m], ok_new[m]) = compare_rows(g.dout1, q, g.slots, ref);
  }
  ok = ok && (kv_equal || q.T > 64) && kv_tally.ok && ok_old && ok_new[0] && ok_new[1];
  const int csize = attention_decode_cluster_size(g.a_new, s);
  char heads[16];
  std::snprintf(heads, sizeof heads, "%d/%d", q.Hq, q.Hkv);
  std::printf("qkv %3d %5d %6s %4d %4d %4d %4.1f %3s %2d | kv %-5s %8.2e | %8.2e %8.2e %8.2e %s\n", q.T, q.ctx, heads,
              q.D, q.window, q.qk_norm, q.clip, q.padding ? "pad" : "-", csize, kv_equal ? "equal" : "DIFF",
              kv_tally.worst, e_old, e_new[0], e_new[1],
              ok ? "ok"
              : (!kv_equal && q.T <= 64) || !kv_tally.ok ? "MISMATCH (kv)"
              : !ok_old                   ? "MISMATCH (old)"
                                          : "MISMATCH (fused)");
  std::fflush(stdout);

  // graph replays of each merge: caches restored and output poisoned before each
  if (q.T == 4 && q.ctx == 512 && q.Hq == 32 && q.D == 128) {
    for (int m = 0; m < 2; ++m) {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      DC_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      attention_decode_qkv(g.a_new, g.p_new, s, merges[m]);
      DC_CUDA(cudaStreamEndCapture(s, &graph));
      DC_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      bool same = true;
      for (int i = 0; i < 3; ++i) {
        restore_caches(g, s);
        DC_CUDA(cudaMemsetAsync(g.dout1, 0xff, out_elems * 2, s));
        DC_CUDA(cudaGraphLaunch(exec, s));
        DC_CUDA(cudaStreamSynchronize(s));
        same = same && download(g.dout1, out_elems) == outs[m] && download(g.dk1, in.cache_elems) == k_old &&
               download(g.dv1, in.cache_elems) == v_old;
      }
      cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
      std::printf("graph: 3 replays of the fused %s path (T=%d ctx=%d) %s the eager output and caches\n",
                  m ? "cluster" : "split-K", q.T, q.ctx, same ? "match" : "DO NOT match");
      if (!same) std::printf("FAIL fused graph replay\n");
      ok = ok && same;
    }
  }
  rig_release(g);
  return ok;
}

// us per step of `launch` replayed `n` times back to back from one CUDA graph (after one warm-up).
template <typename F>
double graph_us(F&& launch, int n, cudaStream_t s) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DC_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) launch();
  DC_CUDA(cudaStreamEndCapture(s, &graph));
  DC_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  DC_CUDA(cudaEventCreate(&e0));
  DC_CUDA(cudaEventCreate(&e1));
  DC_CUDA(cudaGraphLaunch(exec, s));
  DC_CUDA(cudaEventRecord(e0, s));
  DC_CUDA(cudaGraphLaunch(exec, s));
  DC_CUDA(cudaEventRecord(e1, s));
  DC_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  DC_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
  return ms * 1000.0 / n;
}

bool qkv_checks(cudaStream_t s) {
  std::printf("%-3s %3s %5s %6s %4s %4s %4s %4s %3s %2s | %-8s %8s | %8s %8s %8s %s\n", "", "T", "ctx", "Hq/Hkv", "D",
              "win", "norm", "clip", "pad", "cl", "kv", "kv err", "err old", "err f-sk", "err f-cl", "ok");
  std::vector<QkvCase> v;
  for (int T : {1, 4, 16, 64})
    for (int ctx : {1, 17, 512, 4096}) v.push_back({T, ctx, 32, 4, 128, 0, 1, 0.f, false});
  for (int T : {1, 16})
    for (int ctx : {17, 512}) v.push_back({T, ctx, 16, 16, 64, 200, 0, 0.f, false});
  v.push_back({4, 300, 32, 4, 128, 0, 0, 2.f, false});   // no norm, clip (Mixtral-like with clip_qkv)
  v.push_back({4, 300, 32, 4, 128, 0, 1, 1.5f, false});  // norm and clip
  v.push_back({8, 700, 32, 4, 128, 0, 1, 0.f, true});    // padding tokens
  v.push_back({4, 300, 32, 4, 256, 0, 1, 0.f, false});
  v.push_back({4, 300, 12, 4, 72, 0, 1, 0.f, false});
  v.push_back({4, 300, 8, 8, 96, 100, 0, 0.f, false});
  v.push_back({4, 300, 16, 1, 8, 0, 1, 0.f, false});
  v.push_back({1, 700, 16, 1, 128, 0, 1, 0.f, false});  // G 16
  v.push_back({1, 129, 32, 4, 128, 0, 1, 0.f, false});  // the owner split holds the new key alone
  v.push_back({1, 1000, 32, 4, 128, 0, 1, 0.f, false});
  v.push_back({2, 1030, 32, 4, 128, 0, 1, 0.f, false});
  v.push_back({1, 2000, 32, 4, 128, 500, 1, 0.f, false});
  v.push_back({1, 900, 32, 4, 256, 0, 0, 0.f, false});
  // qkv_post above 64 tokens takes 4 heads per warp (qkv_post_items_kernel): the same checks against fp64
  v.push_back({128, 17, 32, 4, 128, 0, 1, 0.f, false});
  v.push_back({256, 17, 32, 4, 128, 0, 1, 0.f, true});   // padding tokens
  v.push_back({128, 17, 32, 4, 128, 0, 0, 2.f, false});  // no norm, clip
  v.push_back({128, 17, 12, 4, 72, 0, 1, 0.f, false});   // 20 heads, D 72
  v.push_back({128, 17, 32, 4, 256, 0, 1, 1.5f, false});  // D 256, norm and clip
  v.push_back({96, 17, 14, 2, 128, 0, 1, 0.f, false});   // 18 heads: not a multiple of 4, one head per warp
  bool ok = true;
  uint64_t seed = 5000;
  for (const QkvCase& q : v) ok = qkv_row(q, seed++, s) && ok;

  // qkv_post + attention_decode vs attention_decode_qkv in graph replay
  std::printf("%-5s %3s %5s | %11s %11s %8s %8s\n", "time", "T", "ctx", "old us", "fused us", "saved", "old/new");
  constexpr int kReps = 100;
  for (int T : {1, 4, 16, 64}) {
    for (int ctx : {512, 4096}) {
      QkvRig g;
      rig_build({T, ctx, 32, 4, 128, 0, 1, 0.f, false}, 9000 + T + ctx, g);
      // eager once each first (the split-K workspace, cluster-capacity queries)
      qkv_post(g.p_old, s);
      attention_decode(g.in.args, s);
      attention_decode_qkv(g.a_new, g.p_new, s);
      DC_CUDA(cudaStreamSynchronize(s));
      const double old_us = graph_us(
          [&] {
            qkv_post(g.p_old, s);
            attention_decode(g.in.args, s);
          },
          kReps, s);
      const double new_us = graph_us([&] { attention_decode_qkv(g.a_new, g.p_new, s); }, kReps, s);
      std::printf("time  %3d %5d | %11.2f %11.2f %8.2f %7.2fx\n", T, ctx, old_us, new_us, old_us - new_us,
                  old_us / new_us);
      std::fflush(stdout);
      rig_release(g);
    }
  }
  return ok;
}

}  // namespace
