// Correctness and speed of the prefill kernels on the GPU (built and run by prefill-check.sh):
//
//   attention: attention_flash's two kernels (src/attention_flash.cu's mma.sync tiles, rows by plan_attention_flash's
//     rule, and src/attention_flash_wgmma.cu's warpgroup tiles, with one CTA per (tile, head) item and with a
//     persistent grid of one CTA per SM, whose output must be the same bits) and the per-head kernel
//     (attention_per_head, what prefill ran before) on random bf16 paged K/V
//     with scrambled block tables (block size 16), against an fp64 CPU reference on the same bf16
//     values. Cases vary the chunk start (prefix cached: first position > 0), chunk lengths (tiles
//     shorter than the tile height, sequences of different lengths in one step), sliding window,
//     GQA ratio (1, 3, 4, 8, 16) and D (16, 64, 80, 96, 128). An element passes when
//     |out - ref| <= 4e-3 + 2e-2 |ref| (attention_check.cu's tolerance). The two long cases check
//     a sample of rows against fp64 (every row against the per-head kernel's output is printed too).
//   linear_f32: the entry (linear_f32: tiled kernel where it applies), the row kernel
//     (linear_f32_rows: what T > 8 ran before) and the tiled kernel at 64 and 128 tokens per CTA
//     tile (linear_f32_tiled) against fp64; an output passes when |y - ref| <= 1e-5 sum_k |x_k w_k|.
//
//   prefill_check --part attn|linear|all [--iters N] [--case SUBSTRING (attention cases whose name holds it)]
//
// Times: median of --iters launches, each after a 256 MB memset that evicts the 60 MB L2.
// Attention TFLOP/s counts 4 * D per (query row, query head, visible key) (QK^T and PV, masked
// keys not counted); linear TFLOP/s counts 2 * T * N * K.
// Exit status: 0 all rows pass, 1 a mismatch, 2 a CUDA or setup error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
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

using harness::parallel_for;

struct Timer {
  void* flush = nullptr;
  size_t flush_bytes = size_t(256) << 20;
  cudaStream_t s = nullptr;
  int iters = 20;
  // median us of `iters` runs of f, each after an L2 flush
  double time(const std::function<void()>& f) {
    cudaEvent_t e0, e1;
    DC_CUDA(cudaEventCreate(&e0));
    DC_CUDA(cudaEventCreate(&e1));
    const float us = harness::cold_median_us(f, flush, flush_bytes, s, iters, e0, e1);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return us;
  }
};

// ---------------------------------------------------------------- attention

struct AttnCase {
  const char* name;
  int S, len, start;  // sequences; chunk rows and first position of sequence 0 (others vary a little)
  int Hq, Hkv, D, window;
  int sample;         // check every `sample`-th row (and each sequence's last 64) against fp64; 1 = all
};

struct AttnInputs {
  int T = 0, stride = 0, ldq = 0, blocks = 0;
  std::vector<int32_t> pos, tok_seq, tables, tiles_mma, tiles_wg;
  std::vector<float> q;
  std::vector<uint16_t> k, v;
  double flops = 0;
  bf16 *dk = nullptr, *dv = nullptr, *dout = nullptr;
  float* dq = nullptr;
  int32_t *dpos = nullptr, *dseq = nullptr, *dtables = nullptr, *dtiles_mma = nullptr, *dtiles_wg = nullptr;
  FlashPlan plan_mma, plan_wg, plan_wgp;  // each kernel's plan (the mma.sync kernel's rows by the planner's rule);
                                          // plan_wg one CTA per item, plan_wgp the persistent grid
  FlashKernel auto_kernel = FlashKernel::kMma;  // what the planner picks for this step
  AttentionArgs args{};
};

// model.cu's plan_flash_tiles: plan_attention_flash, with the kernel forced (`want`) or by its rule (kAuto)
FlashPlan plan_tiles(const AttnCase& c, const AttnInputs& in, std::vector<int32_t>& tiles, FlashKernel want) {
  tiles.assign(2 * in.tok_seq.size(), 0);
  const FlashPlan plan = plan_attention_flash(in.tok_seq.data(), in.pos.data(), int(in.tok_seq.size()), c.Hq, c.window,
                                              tiles.data(), want);
  tiles.resize(2 * size_t(plan.num_tiles));
  return plan;
}

void build_attn(const AttnCase& c, uint64_t seed, AttnInputs& in) {
  std::mt19937 rng{uint32_t(seed)};
  std::vector<int> len(c.S), start(c.S);
  for (int s = 0; s < c.S; ++s) {
    len[s] = std::max(1, c.len - (s % 3) * 5);  // different lengths in one step
    start[s] = c.start > 0 ? c.start + (s % 4) * 7 : 0;
  }
  int max_blocks = 0, total_blocks = 0;
  for (int s = 0; s < c.S; ++s) {
    const int nb = (start[s] + len[s] + kBlock - 1) / kBlock;
    max_blocks = std::max(max_blocks, nb), total_blocks += nb;
  }
  in.stride = max_blocks + 1;
  in.blocks = total_blocks + 3;
  std::vector<int32_t> perm(in.blocks);
  for (int i = 0; i < in.blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  in.tables.assign(size_t(c.S) * in.stride, 0);
  int next = 0;
  for (int s = 0; s < c.S; ++s)
    for (int b = 0; b < (start[s] + len[s] + kBlock - 1) / kBlock; ++b) in.tables[size_t(s) * in.stride + b] = perm[next++];
  in.pos.clear(), in.tok_seq.clear();
  in.flops = 0;
  for (int s = 0; s < c.S; ++s)
    for (int i = 0; i < len[s]; ++i) {
      const int p = start[s] + i;
      in.pos.push_back(p), in.tok_seq.push_back(s);
      const int lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
      in.flops += 4.0 * c.D * c.Hq * (p - lo + 1);
    }
  in.T = int(in.pos.size());
  in.plan_mma = plan_tiles(c, in, in.tiles_mma, FlashKernel::kMma);
  in.plan_wg = plan_tiles(c, in, in.tiles_wg, FlashKernel::kWgmma);
  in.plan_wgp = in.plan_wg;
  in.plan_wg.ctas = 0;
  in.plan_wgp.ctas = current_device_sms();
  std::vector<int32_t> scratch;
  in.auto_kernel = plan_tiles(c, in, scratch, FlashKernel::kAuto).kernel;
  in.ldq = (c.Hq + 2 * c.Hkv) * c.D;  // q inside the fused qkv row, as the model passes it
  in.q.resize(size_t(in.T) * in.ldq);
  std::uniform_real_distribution<float> uq(-3.f, 3.f);
  for (float& x : in.q) x = uq(rng);
  const size_t cache = size_t(in.blocks) * kBlock * c.Hkv * c.D;
  DC_CUDA(cudaMalloc(&in.dk, cache * 2));
  DC_CUDA(cudaMalloc(&in.dv, cache * 2));
  DC_CUDA(cudaMalloc(&in.dout, size_t(in.T) * c.Hq * c.D * 2));
  DC_CUDA(cudaMalloc(&in.dq, in.q.size() * 4));
  DC_CUDA(cudaMalloc(&in.dpos, size_t(in.T) * 4));
  DC_CUDA(cudaMalloc(&in.dseq, size_t(in.T) * 4));
  DC_CUDA(cudaMalloc(&in.dtables, in.tables.size() * 4));
  DC_CUDA(cudaMalloc(&in.dtiles_mma, in.tiles_mma.size() * 4));
  DC_CUDA(cudaMalloc(&in.dtiles_wg, in.tiles_wg.size() * 4));
  fill_uniform_bf16<<<1024, 256>>>(in.dk, cache, seed * 2 + 1);
  fill_uniform_bf16<<<1024, 256>>>(in.dv, cache, seed * 2 + 2);
  DC_LAUNCHED();
  in.k.resize(cache), in.v.resize(cache);
  DC_CUDA(cudaMemcpy(in.k.data(), in.dk, cache * 2, cudaMemcpyDeviceToHost));
  DC_CUDA(cudaMemcpy(in.v.data(), in.dv, cache * 2, cudaMemcpyDeviceToHost));
  DC_CUDA(cudaMemcpy(in.dq, in.q.data(), in.q.size() * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dpos, in.pos.data(), size_t(in.T) * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dseq, in.tok_seq.data(), size_t(in.T) * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dtables, in.tables.data(), in.tables.size() * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dtiles_mma, in.tiles_mma.data(), in.tiles_mma.size() * 4, cudaMemcpyHostToDevice));
  DC_CUDA(cudaMemcpy(in.dtiles_wg, in.tiles_wg.data(), in.tiles_wg.size() * 4, cudaMemcpyHostToDevice));
  AttentionArgs& a = in.args;
  a.q = in.dq, a.ldq = in.ldq, a.k_cache = in.dk, a.v_cache = in.dv, a.pos = in.dpos, a.tok_seq = in.dseq;
  a.tables = in.dtables, a.table_stride = in.stride, a.T = in.T, a.B = kBlock, a.Hq = c.Hq, a.Hkv = c.Hkv;
  a.D = c.D, a.scale = 1.f / std::sqrt(float(c.D)), a.window = c.window, a.out = in.dout;
}

void release_attn(AttnInputs& in) {
  cudaFree(in.dk), cudaFree(in.dv), cudaFree(in.dout), cudaFree(in.dq);
  cudaFree(in.dpos), cudaFree(in.dseq), cudaFree(in.dtables), cudaFree(in.dtiles_mma), cudaFree(in.dtiles_wg);
}

// fp64 reference of the checked rows: [rows.size(), Hq * D]
std::vector<double> reference_attn(const AttnCase& c, const AttnInputs& in, const std::vector<int>& rows) {
  std::vector<double> out(rows.size() * c.Hq * c.D);
  parallel_for(int(rows.size()), [&](int ri) {
    const int t = rows[ri];
    const int pos = in.pos[t];
    const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
    const int32_t* table = in.tables.data() + size_t(in.tok_seq[t]) * in.stride;
    harness::attention_reference_row(in.q.data() + size_t(t) * in.ldq, pos, lo, table, in.k, in.v, kBlock, c.Hq, c.Hkv, c.D,
                                     out.data() + size_t(ri) * c.Hq * c.D);
  });
  return out;
}

std::vector<uint16_t> fetch_out(const AttnCase& c, const AttnInputs& in) {
  std::vector<uint16_t> out(size_t(in.T) * c.Hq * c.D);
  DC_CUDA(cudaMemcpy(out.data(), in.dout, out.size() * 2, cudaMemcpyDeviceToHost));
  return out;
}

// largest |out - ref| over the checked rows and whether all are within tolerance (NaN fails)
std::pair<double, bool> compare_attn(const AttnCase& c, const std::vector<uint16_t>& out, const std::vector<int>& rows,
                                     const std::vector<double>& ref) {
  const size_t W = size_t(c.Hq) * c.D;
  harness::Tally tally;
  for (size_t ri = 0; ri < rows.size(); ++ri)
    for (size_t e = 0; e < W; ++e) tally.add(bf16_to_float(out[size_t(rows[ri]) * W + e]), ref[ri * W + e], kAtol, kRtol);
  return {tally.worst, tally.ok};
}

std::vector<AttnCase> attn_cases() {
  return {
      {"qwen3 16x512", 16, 512, 0, 32, 4, 128, 0, 1},
      {"qwen3 1x8192", 1, 8192, 0, 32, 4, 128, 0, 97},
      {"prefix 300+100", 1, 100, 300, 32, 4, 128, 0, 1},
      {"D64 3 seqs", 3, 77, 0, 32, 4, 64, 0, 1},
      {"window 200", 2, 200, 1000, 32, 4, 128, 200, 1},
      {"G1 16/16", 2, 130, 50, 16, 16, 128, 0, 1},
      {"G16 16/1", 1, 65, 0, 16, 1, 128, 0, 1},
      {"G3 D96 win64", 2, 90, 20, 12, 4, 96, 64, 1},
      {"D16 G4", 1, 33, 0, 8, 2, 16, 0, 1},
      {"D64 win100 prefix", 4, 64, 64, 32, 4, 64, 100, 1},
      {"one row at 5000", 1, 1, 5000, 32, 4, 128, 0, 1},
      {"window 1", 1, 300, 0, 32, 4, 128, 1, 1},
      {"D80 G2", 2, 70, 3, 8, 4, 80, 0, 1},
      {"D128 G8 2x2048", 2, 2048, 0, 32, 4, 128, 0, 31},
      {"D64 G16 1x4096", 1, 4096, 0, 64, 4, 64, 0, 61},
      {"qwen3 32x256", 32, 256, 0, 32, 4, 128, 0, 3},
      {"qwen3 8x1024", 8, 1024, 0, 32, 4, 128, 0, 7},
      {"D64 win128 16x300", 16, 300, 0, 32, 4, 64, 128, 5},
  };
}

bool run_attention(Timer& tm, const std::string& only) {
  std::printf("attention: per-head kernel (old), flash mma.sync (rows by plan_attention_flash's rule) and flash wgmma (128 "
              "rows); auto: the planner's pick; tolerance |err| <= %.0e + %.0e |ref|\n",
              kAtol, kRtol);
  std::printf("%-20s %5s %5s %6s %4s %4s %6s %4s %5s | %9s %9s %9s %9s %7s %7s %7s %7s %7s %7s | %9s %9s %9s %9s %s\n",
              "case", "T", "start", "Hq/Hkv", "D", "win", "rows", "tile", "auto", "old us", "mma us", "wgmma us",
              "wgp us", "old TF", "mma TF", "wg TF", "wgp TF", "wg/mma", "wgp/wg", "err old", "err mma", "err wg",
              "wg-old", "ok");
  bool all_ok = true;
  uint64_t seed = 11;
  for (const AttnCase& c : attn_cases()) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    AttnInputs in;
    build_attn(c, seed++, in);
    std::vector<int> rows;
    std::vector<char> take(in.T, 0);
    for (int t = 0; t < in.T; t += c.sample) take[t] = 1;
    for (int t = 0; t < in.T; ++t)
      if (t + 64 >= in.T || in.tok_seq[std::min(in.T - 1, t + 64)] != in.tok_seq[t]) take[t] = 1;  // sequences' last 64
    for (int t = 0; t < in.T; ++t)
      if (take[t]) rows.push_back(t);
    const std::vector<double> ref = reference_attn(c, in, rows);
    const size_t out_bytes = size_t(in.T) * c.Hq * c.D * 2;
    auto run_old = [&] { attention_per_head(in.args, tm.s); };
    auto run_mma = [&] { attention_flash(in.args, in.dtiles_mma, in.plan_mma, tm.s); };
    auto run_wg = [&] { attention_flash(in.args, in.dtiles_wg, in.plan_wg, tm.s); };
    auto run_wgp = [&] { attention_flash(in.args, in.dtiles_wg, in.plan_wgp, tm.s); };
    auto output_of = [&](const std::function<void()>& f) {
      DC_CUDA(cudaMemsetAsync(in.dout, 0xff, out_bytes, tm.s));  // NaNs unless every element is written
      f();
      DC_CUDA(cudaStreamSynchronize(tm.s));
      return fetch_out(c, in);
    };
    const std::vector<uint16_t> out_old = output_of(run_old), out_mma = output_of(run_mma), out_wg = output_of(run_wg);
    const std::vector<uint16_t> out_wgp = output_of(run_wgp);
    const auto [err_old, ok_old] = compare_attn(c, out_old, rows, ref);
    const auto [err_mma, ok_mma] = compare_attn(c, out_mma, rows, ref);
    const auto [err_wg, ok_wg] = compare_attn(c, out_wg, rows, ref);
    // the persistent grid computes each item as the one-CTA-per-item grid does: the same bits
    const bool same_wgp = out_wgp == out_wg;
    double diff = 0;  // every row: wgmma against the per-head kernel
    for (size_t i = 0; i < out_wg.size(); ++i) {
      const double e = std::fabs(double(bf16_to_float(out_wg[i])) - bf16_to_float(out_old[i]));
      if (!(e <= diff)) diff = std::isnan(e) ? INFINITY : e;
    }
    const double us_old = tm.time(run_old), us_mma = tm.time(run_mma), us_wg = tm.time(run_wg);
    const double us_wgp = tm.time(run_wgp);
    const bool ok = ok_old && ok_mma && ok_wg && same_wgp;
    all_ok = all_ok && ok;
    char heads[16];
    std::snprintf(heads, sizeof heads, "%d/%d", c.Hq, c.Hkv);
    const char* verdict = ok               ? "ok"
                          : !ok_wg         ? "MISMATCH (wgmma)"
                          : !same_wgp      ? "MISMATCH (persistent wgmma != wgmma)"
                          : !ok_mma        ? "MISMATCH (mma)"
                                           : "MISMATCH (old)";
    std::printf("%-20s %5d %5d %6s %4d %4d %6zu %4d %5s | %9.1f %9.1f %9.1f %9.1f %7.1f %7.1f %7.1f %7.1f %6.2fx "
                "%6.2fx | %9.2e %9.2e %9.2e %9.2e %s\n",
                c.name, in.T, c.start, heads, c.D, c.window, rows.size(), in.plan_mma.rows,
                in.auto_kernel == FlashKernel::kWgmma ? "wgmma" : "mma", us_old, us_mma, us_wg, us_wgp,
                in.flops / us_old / 1e6, in.flops / us_mma / 1e6, in.flops / us_wg / 1e6, in.flops / us_wgp / 1e6,
                us_mma / us_wg, us_wg / us_wgp, err_old, err_mma, err_wg, diff, verdict);
    std::fflush(stdout);
    release_attn(in);
  }
  return all_ok;
}

// ---------------------------------------------------------------- linear_f32

struct LinCase {
  int T, K, N;
  bool time;
};

bool run_linear(Timer& tm) {
  const LinCase cases[] = {
      {9, 2048, 128, false},   {64, 2048, 128, false},  {200, 2048, 128, true},  {1000, 2048, 128, true},
      {4097, 2048, 128, true}, {8192, 2048, 128, true}, {8192, 2048, 64, true},  {8192, 2048, 60, false},
      {8192, 2048, 1, false},  {3000, 100, 128, false}, {3000, 2047, 128, false}, {8192, 4096, 256, true},
  };
  std::printf("linear_f32: Y[T, N] = X[T, K] W[N, K]^T fp32; tolerance |err| <= 1e-5 sum|x w|; entry = linear_f32()\n");
  std::printf("%5s %5s %4s | %9s %9s %9s %9s | %7s %7s %7s %7s | %8s %8s %8s %8s %s\n", "T", "K", "N", "rows us",
              "entry us", "t64 us", "t128 us", "rows TF", "entry TF", "t64 TF", "t128 TF", "err rows", "err ent",
              "err t64", "err t128", "ok");
  bool all_ok = true;
  std::mt19937 rng{7};
  for (const LinCase& c : cases) {
    std::vector<float> X(size_t(c.T) * c.K), W(size_t(c.N) * c.K);
    std::uniform_real_distribution<float> ux(-2.f, 2.f), uw(-0.05f, 0.05f);
    for (float& x : X) x = ux(rng);
    for (float& w : W) w = uw(rng);
    std::vector<double> ref(size_t(c.T) * c.N), mag(size_t(c.T) * c.N);
    parallel_for(c.T, [&](int t) {
      for (int n = 0; n < c.N; ++n) {
        double s = 0, m = 0;
        for (int k = 0; k < c.K; ++k) {
          const double p = double(X[size_t(t) * c.K + k]) * W[size_t(n) * c.K + k];
          s += p, m += std::fabs(p);
        }
        ref[size_t(t) * c.N + n] = s, mag[size_t(t) * c.N + n] = m;
      }
    });
    float *dx, *dw, *dy;
    DC_CUDA(cudaMalloc(&dx, X.size() * 4));
    DC_CUDA(cudaMalloc(&dw, W.size() * 4));
    DC_CUDA(cudaMalloc(&dy, ref.size() * 4));
    DC_CUDA(cudaMemcpy(dx, X.data(), X.size() * 4, cudaMemcpyHostToDevice));
    DC_CUDA(cudaMemcpy(dw, W.data(), W.size() * 4, cudaMemcpyHostToDevice));
    auto check = [&](const std::function<void()>& f) -> std::pair<double, bool> {
      DC_CUDA(cudaMemsetAsync(dy, 0xff, ref.size() * 4, tm.s));
      f();
      DC_CUDA(cudaStreamSynchronize(tm.s));
      std::vector<float> y(ref.size());
      DC_CUDA(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
      harness::Tally tally;
      for (size_t i = 0; i < y.size(); ++i) tally.add_err(std::fabs(double(y[i]) - ref[i]), 1e-5 * mag[i] + 1e-30);
      return {tally.worst, tally.ok};
    };
    auto rows = [&] { linear_f32_rows(dx, c.T, c.K, dw, c.N, dy, tm.s); };
    auto entry = [&] { linear_f32(dx, c.T, c.K, dw, c.N, dy, tm.s); };
    auto t64 = [&] { linear_f32_tiled(dx, c.T, c.K, dw, c.N, dy, 64, tm.s); };
    auto t128 = [&] { linear_f32_tiled(dx, c.T, c.K, dw, c.N, dy, 128, tm.s); };
    const bool tiled = c.K % 4 == 0 && c.N >= 32;  // linear_f32_tiled's shapes (the buffers are aligned)
    const auto [err_rows, ok_rows] = check(rows);
    const auto [err_entry, ok_entry] = check(entry);
    std::pair<double, bool> r64{0.0, true}, r128{0.0, true};
    if (tiled) r64 = check(t64), r128 = check(t128);
    const bool ok = ok_rows && ok_entry && r64.second && r128.second;
    all_ok = all_ok && ok;
    const double flops = 2.0 * c.T * c.N * c.K;
    char times[160] = "        -         -         -         - |       -       -       -       -";
    if (c.time) {
      const double u_rows = tm.time(rows), u_entry = tm.time(entry);
      const double u64 = tiled ? tm.time(t64) : NAN, u128 = tiled ? tm.time(t128) : NAN;
      std::snprintf(times, sizeof times, "%9.1f %9.1f %9.1f %9.1f | %7.2f %7.2f %7.2f %7.2f", u_rows, u_entry, u64, u128,
                    flops / u_rows / 1e6, flops / u_entry / 1e6, flops / u64 / 1e6, flops / u128 / 1e6);
    }
    std::printf("%5d %5d %4d | %s | %8.1e %8.1e %8.1e %8.1e %s\n", c.T, c.K, c.N, times, err_rows, err_entry,
                r64.first, r128.first, ok ? "ok" : "MISMATCH");
    std::fflush(stdout);
    cudaFree(dx), cudaFree(dw), cudaFree(dy);
  }
  return all_ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string part = "all", only;
  Timer tm;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--part" && i + 1 < argc) {
      part = argv[++i];
    } else if (arg == "--iters" && i + 1 < argc) {
      tm.iters = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--case" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: prefill_check [--part attn|linear|all] [--iters N] [--case SUBSTRING]\n");
      return 2;
    }
  }
  if (part != "attn" && part != "linear" && part != "all") {
    std::fprintf(stderr, "--part must be attn, linear or all\n");
    return 2;
  }
  try {
    cudaDeviceProp prop{};
    DC_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB; %d timed iterations (L2 flushed before each)\n", prop.name,
                prop.multiProcessorCount, prop.l2CacheSize >> 20, tm.iters);
    DC_CUDA(cudaMalloc(&tm.flush, tm.flush_bytes));
    DC_CUDA(cudaStreamCreateWithFlags(&tm.s, cudaStreamNonBlocking));
    bool ok = true;
    if (part != "linear") ok = run_attention(tm, only) && ok;
    if (part != "attn") ok = run_linear(tm) && ok;
    cudaFree(tm.flush);
    cudaStreamDestroy(tm.s);
    std::printf("%s\n", ok ? "ALL OK" : "FAILED: see MISMATCH rows");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
