#include "reference.h"
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

namespace dispatch::ref {

namespace {
template <typename LoadW>
void grouped_gemm(const uint16_t* X, uint16_t* Y, const HostRows& rows, int E, int N, int K, LoadW load_w) {
  std::vector<float> x(K);
  for (int e = 0; e < E; ++e) {
    const int r0 = rows.begin(e), m = rows.count(e);
    for (int r = r0; r < r0 + m; ++r) {
      for (int kk = 0; kk < K; ++kk) x[kk] = bf16_to_f32(X[size_t(r) * K + kk]);
      for (int n = 0; n < N; ++n) {
        float acc = 0.f;
        const size_t w0 = (size_t(e) * N + n) * K;
        for (int kk = 0; kk < K; ++kk) acc += x[kk] * load_w(w0 + kk);
        Y[size_t(r) * N + n] = f32_to_bf16(acc * load_w.scale(size_t(e) * N + n));
      }
    }
  }
}
struct LoadBf16 {
  const uint16_t* w;
  float operator()(size_t i) const { return bf16_to_f32(w[i]); }
  float scale(size_t) const { return 1.f; }
};
struct LoadInt8 {
  const int8_t* w;
  const float* s;
  float operator()(size_t i) const { return float(w[i]); }
  float scale(size_t i) const { return s[i]; }
};
}  // namespace

void grouped_gemm_bf16(const uint16_t* X, const uint16_t* W, uint16_t* Y, const HostRows& rows, int E, int N, int K) {
  grouped_gemm(X, Y, rows, E, N, K, LoadBf16{W});
}

void grouped_gemm_w8a16(const uint16_t* X, const int8_t* W, const float* scales, uint16_t* Y, const HostRows& rows,
                        int E, int N, int K) {
  grouped_gemm(X, Y, rows, E, N, K, LoadInt8{W, scales});
}

void router_topk(const float* logits, const float* bias, int T, const RouterConfig& cfg, int32_t* ids,
                 float* weights) {
  const int E = cfg.num_experts, k = cfg.top_k;
  std::vector<float> score(E), choice(E);
  for (int t = 0; t < T; ++t) {
    const float* row = logits + size_t(t) * E;
    if (cfg.scoring == Scoring::kSoftmax) {
      const float mx = *std::max_element(row, row + E);
      float sum = 0.f;
      for (int e = 0; e < E; ++e) sum += score[e] = std::exp(row[e] - mx);
      for (int e = 0; e < E; ++e) score[e] /= sum;
    } else {
      for (int e = 0; e < E; ++e) score[e] = 1.f / (1.f + std::exp(-row[e]));
    }
    for (int e = 0; e < E; ++e) choice[e] = score[e] + (bias ? bias[e] : 0.f);
    if (cfg.num_groups > 1) {
      const int gs = E / cfg.num_groups;
      std::vector<float> gscore(cfg.num_groups);
      for (int g = 0; g < cfg.num_groups; ++g) {
        std::vector<float> v(choice.begin() + g * gs, choice.begin() + (g + 1) * gs);
        std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
        gscore[g] = v[0] + v[1];
      }
      std::vector<bool> keep(cfg.num_groups, false);
      for (int r = 0; r < cfg.topk_groups; ++r) {
        int best = -1;
        for (int g = 0; g < cfg.num_groups; ++g)
          if (!keep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
        keep[best] = true;
      }
      for (int e = 0; e < E; ++e)
        if (!keep[e / gs]) choice[e] = -FLT_MAX;
    }
    float wsum = 0.f;
    for (int r = 0; r < k; ++r) {
      int best = 0;
      for (int e = 1; e < E; ++e)
        if (choice[e] > choice[best]) best = e;  // strict: ties keep the lower index
      ids[size_t(t) * k + r] = best;
      weights[size_t(t) * k + r] = score[best];
      wsum += score[best];
      choice[best] = -FLT_MAX;
    }
    for (int r = 0; r < k; ++r) {
      float& w = weights[size_t(t) * k + r];
      if (cfg.renormalize) w /= (wsum + 1e-20f);
      w *= cfg.scale;
    }
  }
}

void moe_align(const int32_t* ids, int M, int E, int cap, int32_t* counts, int32_t* offsets, int32_t* slot_row) {
  std::vector<int32_t> next(E);
  std::fill(counts, counts + E, 0);
  for (int s = 0; s < M; ++s) ++counts[ids[s]];
  int running = 0;
  for (int e = 0; e < E; ++e) {
    if (offsets) offsets[e] = running;
    next[e] = cap > 0 ? e * cap : running;
    running += counts[e];
  }
  if (offsets) offsets[E] = running;
  for (int s = 0; s < M; ++s) slot_row[s] = next[ids[s]]++;
}

void moe_permute(const uint16_t* X, const int32_t* slot_row, int T, int k, int H, uint16_t* Xp) {
  for (int s = 0; s < T * k; ++s) std::memcpy(Xp + size_t(slot_row[s]) * H, X + size_t(s / k) * H, size_t(H) * 2);
}

void moe_unpermute(const uint16_t* Y, const int32_t* slot_row, const float* weights, int T, int k, int H,
                   uint16_t* out) {
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      float acc = 0.f;
      for (int j = 0; j < k; ++j)
        acc += weights[size_t(t) * k + j] * bf16_to_f32(Y[size_t(slot_row[size_t(t) * k + j]) * H + h]);
      out[size_t(t) * H + h] = f32_to_bf16(acc);
    }
}

void silu_mul(const uint16_t* h, int rows, int I, uint16_t* act) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < I; ++i) {
      const float g = bf16_to_f32(h[size_t(r) * 2 * I + i]), u = bf16_to_f32(h[size_t(r) * 2 * I + I + i]);
      act[size_t(r) * I + i] = f32_to_bf16(g / (1.f + std::exp(-g)) * u);
    }
}

void quantize_int8_rows(const uint16_t* w, int rows, int K, int8_t* q, float* scale) {
  for (int r = 0; r < rows; ++r) {
    float amax = 0.f;
    for (int i = 0; i < K; ++i) amax = std::max(amax, std::fabs(bf16_to_f32(w[size_t(r) * K + i])));
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    for (int i = 0; i < K; ++i) {
      const float v = std::nearbyint(bf16_to_f32(w[size_t(r) * K + i]) * inv);
      q[size_t(r) * K + i] = int8_t(std::min(std::max(v, -127.f), 127.f));
    }
    scale[r] = amax / 127.f;
  }
}

}  // namespace dispatch::ref
