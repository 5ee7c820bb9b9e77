// The q|k|v projection with qkv_post in its epilogue (gemm_qkv_post, src/gemm_wgmma_qkv.cuh) against the two launches
// it replaces (gemm() on the same wgmma path, then qkv_post(), whose math attention-check bounds against fp64), on the
// GPU machine; qkv-gemm-check.sh builds and runs it.
//
// Cases: T from 65 to 8,192 (ragged last tiles), Qwen3-30B-A3B's heads (32 q, 4 kv, D 128, per-head q/k norm), no
// norm with a clip that bites and a bias, 20 / 4 heads (a 256-wide tile ending past N), tile widths 128 and 256
// forced and the launcher's own, padding tokens (slot -1) among the tokens, and the rotary sines and cosines from the
// step's rope_table (the model's way) or from sincosf in the epilogue. Checks per case:
//   - q (rotated, fp32, in Y): |fused - ref| <= 1e-5 max|ref| (the two differ only in the order of a head's sum of
//     squares: a few fp32 ulps);
//   - the K and V caches (bf16): every element within one bf16 rounding of the reference (8e-3 |ref| + 1e-6), and how
//     many differ at all is printed (V: none expected; its value is the GEMM's output, clipped, rounded once);
//   - rows no token writes (padding tokens' slots, the rest of the cache) keep their sentinel bits in both;
//   - a rerun gives the same bits.
// Then both timed at Qwen3-30B-A3B's shape (K 2048) at T = 512, 2048 and 8192: median us of the pair gemm + qkv_post
// against the one launch (with the table, then with sincosf; the gemm alone beside them), weights rotated over copies
// that exceed the L2 (each launch streams W, as 48 layers do).
// Exit status: 0 all within bounds, 1 a mismatch, 2 a CUDA error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>
#include "fused_ops.h"
#include "gemm.h"
#include "harness.cuh"

using dcuda::bf16;
using dcuda::QkvPostArgs;
#define CK(call) HARNESS_CK(call)

namespace {

constexpr int kD = 128;
constexpr uint16_t kSentinel = 0x7fc1;  // a NaN no kernel writes

struct Case {
  int T, Hq, Hkv, K, qk_norm;
  float clip;
  bool bias;
  const char* bn;  // DISPATCH_CUDA_QKV_GEMM: "1" = the launcher's pick, "128" / "256" that tile width
  bool table;      // the epilogue reads rope_table's sines and cosines (the model's way) instead of calling sincosf
};

struct Bufs {
  bf16 *X = nullptr, *W = nullptr;
  float *bias = nullptr, *qn = nullptr, *kn = nullptr, *inv = nullptr, *y_ref = nullptr, *y = nullptr;
  int32_t *pos = nullptr, *slots = nullptr;
  float* rope = nullptr;
  bf16 *kc_ref = nullptr, *vc_ref = nullptr, *kc = nullptr, *vc = nullptr;
  size_t cache_elems = 0;
};

void fill_f32(float* d, size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> h(n);
  for (auto& v : h) v = u(g);
  CK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
}

std::vector<uint16_t> down_bf16(const bf16* d, size_t n) {
  std::vector<uint16_t> h(n);
  CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
  return h;
}

std::vector<float> down_f32(const float* d, size_t n) {
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  return h;
}

void reset_caches(Bufs& b) {
  const std::vector<uint16_t> s(b.cache_elems, kSentinel);
  for (bf16* c : {b.kc_ref, b.vc_ref, b.kc, b.vc})
    CK(cudaMemcpy(c, s.data(), b.cache_elems * 2, cudaMemcpyHostToDevice));
}

QkvPostArgs args(const Case& c, const Bufs& b, float* y, bf16* kc, bf16* vc) {
  QkvPostArgs p{};
  p.qkv = y, p.T = c.T, p.Hq = c.Hq, p.Hkv = c.Hkv, p.D = kD, p.qk_norm = c.qk_norm;
  p.q_norm = c.qk_norm ? b.qn : nullptr, p.k_norm = c.qk_norm ? b.kn : nullptr;
  p.eps = 1e-6f, p.clip = c.clip, p.pos = b.pos, p.inv_freq = b.inv, p.slots = b.slots;
  p.k_cache = kc, p.v_cache = vc, p.rope_cs = c.table ? b.rope : nullptr;
  return p;
}

// One case: the reference pair and the fused launch on the same inputs, compared; returns false on a mismatch.
bool run_case(const Case& c, cudaStream_t s) {
  const int N = (c.Hq + 2 * c.Hkv) * kD, W = c.Hkv * kD;
  const int slots_total = c.T + 37;  // some cache rows no token writes
  Bufs b;
  b.cache_elems = size_t(slots_total) * W;
  CK(cudaMalloc(&b.X, size_t(c.T) * c.K * 2));
  CK(cudaMalloc(&b.W, size_t(N) * c.K * 2));
  CK(cudaMalloc(&b.bias, size_t(N) * 4));
  CK(cudaMalloc(&b.qn, kD * 4));
  CK(cudaMalloc(&b.kn, kD * 4));
  CK(cudaMalloc(&b.inv, kD / 2 * 4));
  CK(cudaMalloc(&b.y_ref, size_t(c.T) * N * 4));
  CK(cudaMalloc(&b.y, size_t(c.T) * N * 4));
  CK(cudaMalloc(&b.pos, size_t(c.T) * 4));
  CK(cudaMalloc(&b.slots, size_t(c.T) * 4));
  CK(cudaMalloc(&b.rope, size_t(c.T) * kD * 4));
  for (bf16** p : {&b.kc_ref, &b.vc_ref, &b.kc, &b.vc}) CK(cudaMalloc(p, b.cache_elems * 2));
  harness::fill_uniform_bf16<<<1024, 256>>>(b.X, size_t(c.T) * c.K, 11 + c.T);
  harness::fill_uniform_bf16<<<1024, 256>>>(b.W, size_t(N) * c.K, 12 + c.T);
  CK(cudaGetLastError());
  fill_f32(b.bias, N, 13, -0.5f, 0.5f);
  fill_f32(b.qn, kD, 14, 0.5f, 1.5f);
  fill_f32(b.kn, kD, 15, 0.5f, 1.5f);
  std::vector<float> inv(kD / 2);
  for (int i = 0; i < kD / 2; ++i) inv[i] = std::pow(1e6f, -2.f * i / kD);
  CK(cudaMemcpy(b.inv, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  std::vector<int32_t> pos(c.T), slots(c.T);
  std::vector<int32_t> perm(slots_total);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 g(uint32_t(c.T * 7 + c.Hq));
  std::shuffle(perm.begin(), perm.end(), g);
  for (int t = 0; t < c.T; ++t) {
    pos[t] = int(g() % 40000);
    slots[t] = t % 17 == 5 ? -1 : perm[t];  // padding tokens write no KV
  }
  CK(cudaMemcpy(b.pos, pos.data(), c.T * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.slots, slots.data(), c.T * 4, cudaMemcpyHostToDevice));
  reset_caches(b);
  dcuda::rope_table(b.pos, c.T, kD, b.inv, b.rope, s);
  const float* bias = c.bias ? b.bias : nullptr;

  // reference: the GEMM, then qkv_post
  dcuda::gemm(b.X, c.T, c.K, b.W, N, bias, b.y_ref, false, s);
  dcuda::qkv_post(args(c, b, b.y_ref, b.kc_ref, b.vc_ref), s);
  // fused, twice (the second run's bits must equal the first's)
  setenv("DISPATCH_CUDA_QKV_GEMM", c.bn, 1);
  const QkvPostArgs pf = args(c, b, b.y, b.kc, b.vc);
  bool took = dcuda::gemm_qkv_post(b.X, c.T, c.K, b.W, N, bias, b.y, pf, s);
  CK(cudaStreamSynchronize(s));
  const auto y1 = down_f32(b.y, size_t(c.T) * N);
  const auto k1 = down_bf16(b.kc, b.cache_elems), v1 = down_bf16(b.vc, b.cache_elems);
  took = took && dcuda::gemm_qkv_post(b.X, c.T, c.K, b.W, N, bias, b.y, pf, s);
  CK(cudaStreamSynchronize(s));
  unsetenv("DISPATCH_CUDA_QKV_GEMM");
  CK(cudaGetLastError());
  if (!took) {
    std::printf("FAIL T=%d Hq=%d Hkv=%d: gemm_qkv_post did not take the step\n", c.T, c.Hq, c.Hkv);
    return false;
  }
  const auto y2 = down_f32(b.y, size_t(c.T) * N);
  const auto k2 = down_bf16(b.kc, b.cache_elems), v2 = down_bf16(b.vc, b.cache_elems);
  const auto yr = down_f32(b.y_ref, size_t(c.T) * N);
  const auto kr = down_bf16(b.kc_ref, b.cache_elems), vr = down_bf16(b.vc_ref, b.cache_elems);

  double qmax = 0, qerr = 0;
  for (int t = 0; t < c.T; ++t)
    for (int i = 0; i < c.Hq * kD; ++i) qmax = std::max(qmax, std::fabs(double(yr[size_t(t) * N + i])));
  for (int t = 0; t < c.T; ++t)
    for (int i = 0; i < c.Hq * kD; ++i) {
      const double d = std::fabs(double(y1[size_t(t) * N + i]) - yr[size_t(t) * N + i]);
      qerr = std::isnan(d) ? INFINITY : std::max(qerr, d);
    }
  const bool q_ok = qerr <= 1e-5 * qmax;
  size_t k_diff = 0, v_diff = 0, bad = 0, sentinel_bad = 0;
  auto cmp = [&](const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref, size_t& diff) {
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == ref[i]) continue;
      ++diff;
      if (ref[i] == kSentinel || got[i] == kSentinel) {
        ++sentinel_bad;
        continue;
      }
      const double a = harness::bf16_to_float(got[i]), r = harness::bf16_to_float(ref[i]);
      if (!(std::fabs(a - r) <= 8e-3 * std::fabs(r) + 1e-6)) ++bad;
    }
  };
  cmp(k1, kr, k_diff);
  cmp(v1, vr, v_diff);
  size_t written = 0;  // the rows the reference wrote (its sentinels elsewhere: compared above)
  for (size_t i = 0; i < kr.size(); ++i) written += kr[i] != kSentinel;
  const bool rerun_ok = y1 == y2 && k1 == k2 && v1 == v2;
  const bool ok = q_ok && bad == 0 && sentinel_bad == 0 && rerun_ok && written > 0;
  std::printf("%s T=%5d Hq=%2d Hkv=%d K=%d norm=%d clip=%g bias=%d bn=%s table=%d: q err %.2e (max %.2f), "
              "K bf16 differ %zu, "
              "V %zu of %zu written, out of bound %zu, sentinel mismatches %zu, rerun %s\n",
              ok ? "ok  " : "FAIL", c.T, c.Hq, c.Hkv, c.K, c.qk_norm, c.clip, int(c.bias), c.bn, int(c.table), qerr,
              qmax, k_diff, v_diff, written, bad, sentinel_bad, rerun_ok ? "same bits" : "DIFFERS");
  for (void* p : {(void*)b.X, (void*)b.W, (void*)b.bias, (void*)b.qn, (void*)b.kn, (void*)b.inv, (void*)b.y_ref,
                  (void*)b.y, (void*)b.pos, (void*)b.slots, (void*)b.kc_ref, (void*)b.vc_ref, (void*)b.kc, (void*)b.vc,
                  (void*)b.rope})
    CK(cudaFree(p));
  return ok;
}

// Median us of the pair (gemm + qkv_post) and of the fused launch at Qwen3-30B-A3B's shape, W rotated over copies.
void time_shape(int T, cudaStream_t s) {
  const int Hq = 32, Hkv = 4, K = 2048, N = (Hq + 2 * Hkv) * kD, copies = 6;  // 6 x 21 MB of W: past the L2
  Case c{T, Hq, Hkv, K, 1, 0.f, false, "1", true};
  Bufs b;
  b.cache_elems = size_t(T) * Hkv * kD;
  std::vector<bf16*> Ws(copies);
  for (auto& w : Ws) {
    CK(cudaMalloc(&w, size_t(N) * K * 2));
    harness::fill_uniform_bf16<<<1024, 256>>>(w, size_t(N) * K, 21);
  }
  CK(cudaMalloc(&b.X, size_t(T) * K * 2));
  harness::fill_uniform_bf16<<<1024, 256>>>(b.X, size_t(T) * K, 22);
  CK(cudaMalloc(&b.qn, kD * 4));
  CK(cudaMalloc(&b.kn, kD * 4));
  CK(cudaMalloc(&b.inv, kD / 2 * 4));
  fill_f32(b.qn, kD, 1, 0.5f, 1.5f);
  fill_f32(b.kn, kD, 2, 0.5f, 1.5f);
  fill_f32(b.inv, kD / 2, 3, 0.f, 1.f);
  CK(cudaMalloc(&b.y, size_t(T) * N * 4));
  CK(cudaMalloc(&b.pos, size_t(T) * 4));
  CK(cudaMalloc(&b.slots, size_t(T) * 4));
  std::vector<int32_t> idx(T);
  std::iota(idx.begin(), idx.end(), 0);
  CK(cudaMemcpy(b.pos, idx.data(), T * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.slots, idx.data(), T * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.kc, b.cache_elems * 2));
  CK(cudaMalloc(&b.vc, b.cache_elems * 2));
  CK(cudaMalloc(&b.rope, size_t(T) * kD * 4));
  dcuda::rope_table(b.pos, T, kD, b.inv, b.rope, s);
  const QkvPostArgs p = args(c, b, b.y, b.kc, b.vc);
  QkvPostArgs p_sincos = p;
  p_sincos.rope_cs = nullptr;
  setenv("DISPATCH_CUDA_QKV_GEMM", "1", 1);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto median = [&](auto&& launch) {
    std::vector<float> ms;
    for (int it = -3; it < 30; ++it) {
      CK(cudaEventRecord(e0, s));
      launch(Ws[(it + 3) % copies]);
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (it >= 0) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1e3f;
  };
  const float pair = median([&](const bf16* w) {
    dcuda::gemm(b.X, T, K, w, N, nullptr, b.y, false, s);
    dcuda::qkv_post(p, s);
  });
  const float fused = median([&](const bf16* w) {
    if (!dcuda::gemm_qkv_post(b.X, T, K, w, N, nullptr, b.y, p, s)) std::exit(1);
  });
  const float fused_sincos = median([&](const bf16* w) {
    if (!dcuda::gemm_qkv_post(b.X, T, K, w, N, nullptr, b.y, p_sincos, s)) std::exit(1);
  });
  const float gemm_alone = median([&](const bf16* w) { dcuda::gemm(b.X, T, K, w, N, nullptr, b.y, false, s); });
  unsetenv("DISPATCH_CUDA_QKV_GEMM");
  CK(cudaGetLastError());
  std::printf("time T=%5d (K %d, N %d): gemm + qkv_post %.1f us (gemm alone %.1f), fused %.1f us (%.3fx; the step's "
              "rope_table not counted), fused with sincosf in the epilogue %.1f us (%.3fx)\n",
              T, K, N, pair, gemm_alone, fused, pair / fused, fused_sincos, pair / fused_sincos);
  for (auto w : Ws) CK(cudaFree(w));
  for (void* q : {(void*)b.X, (void*)b.qn, (void*)b.kn, (void*)b.inv, (void*)b.y, (void*)b.pos, (void*)b.slots,
                  (void*)b.kc, (void*)b.vc, (void*)b.rope})
    CK(cudaFree(q));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
}

}  // namespace

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Case cases[] = {
      {65, 32, 4, 2048, 1, 0.f, false, "1", true},      {100, 32, 4, 2048, 1, 0.f, false, "128", false},
      {1000, 32, 4, 2048, 1, 0.f, false, "256", true},  {4100, 32, 4, 2048, 1, 0.f, false, "1", false},
      {8192, 32, 4, 2048, 1, 0.f, false, "1", true},    {777, 16, 2, 1024, 0, 0.75f, true, "1", true},
      {777, 16, 2, 1024, 0, 0.75f, true, "128", false}, {300, 20, 4, 512, 1, 2.f, true, "256", true},
      {300, 20, 4, 512, 1, 0.f, false, "128", true},
  };
  bool ok = true;
  for (const Case& c : cases) ok &= run_case(c, s);
  for (int T : {512, 2048, 8192}) time_shape(T, s);
  std::printf("qkv-gemm-check: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
