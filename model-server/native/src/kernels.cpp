// fp32 CPU kernels: a register-blocked matrix product (4 weight rows x 2 tokens per
// micro-kernel, so each weight vector loaded feeds two tokens and each token vector
// feeds four rows) and paged causal attention. Each has an AVX2+FMA version chosen
// at run time and a portable one.
#include "kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace dispatch_cpu {

namespace {

bool detect_avx2() {
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

const bool kAvx2 = detect_avx2();

void linear_portable(const float* x, const float* w, float* out, int T, int K, int N, const float* bias) {
  for (int n = 0; n < N; n++) {
    const float* wr = w + static_cast<size_t>(n) * K;
    const float b = bias ? bias[n] : 0.f;
    for (int t = 0; t < T; t++) {
      const float* xr = x + static_cast<size_t>(t) * K;
      float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
      int k = 0;
      for (; k + 3 < K; k += 4) {
        s0 += xr[k] * wr[k];
        s1 += xr[k + 1] * wr[k + 1];
        s2 += xr[k + 2] * wr[k + 2];
        s3 += xr[k + 3] * wr[k + 3];
      }
      for (; k < K; k++) s0 += xr[k] * wr[k];
      out[static_cast<size_t>(t) * N + n] = s0 + s1 + (s2 + s3) + b;
    }
  }
}

#if defined(__x86_64__) || defined(_M_X64)
__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  __m128 s = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, s);
  s = _mm_add_ss(s, sh);
  return _mm_cvtss_f32(s);
}

// R weight rows x C tokens; K8 = K rounded down to a multiple of 8.
template <int R, int C>
__attribute__((target("avx2,fma"))) inline void micro(const float* x, const float* w, float* out, int K, int N, int n0,
                                                      int t0, const float* bias) {
  __m256 acc[R][C];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
  const float* wr[R];
  const float* xr[C];
  for (int r = 0; r < R; r++) wr[r] = w + static_cast<size_t>(n0 + r) * K;
  for (int c = 0; c < C; c++) xr[c] = x + static_cast<size_t>(t0 + c) * K;
  int k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 xv[C];
    for (int c = 0; c < C; c++) xv[c] = _mm256_loadu_ps(xr[c] + k);
    for (int r = 0; r < R; r++) {
      const __m256 wv = _mm256_loadu_ps(wr[r] + k);
      for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; r++) {
    for (int c = 0; c < C; c++) {
      float s = hsum(acc[r][c]);
      for (int kk = k; kk < K; kk++) s += wr[r][kk] * xr[c][kk];
      out[static_cast<size_t>(t0 + c) * N + n0 + r] = s + (bias ? bias[n0 + r] : 0.f);
    }
  }
}

__attribute__((target("avx2,fma"))) void linear_avx2(const float* x, const float* w, float* out, int T, int K, int N,
                                                     const float* bias) {
  // Tokens in tiles of 32 so a tile's activations stay in L1/L2 while weights stream past.
  for (int tt = 0; tt < T; tt += 32) {
    const int te = std::min(T, tt + 32);
    int n = 0;
    for (; n + 4 <= N; n += 4) {
      int t = tt;
      for (; t + 2 <= te; t += 2) micro<4, 2>(x, w, out, K, N, n, t, bias);
      for (; t < te; t++) micro<4, 1>(x, w, out, K, N, n, t, bias);
    }
    for (; n < N; n++) {
      int t = tt;
      for (; t + 2 <= te; t += 2) micro<1, 2>(x, w, out, K, N, n, t, bias);
      for (; t < te; t++) micro<1, 1>(x, w, out, K, N, n, t, bias);
    }
  }
}

__attribute__((target("avx2,fma"))) inline float dot_avx2(const float* a, const float* b, int D) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int d = 0;
  for (; d + 16 <= D; d += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), acc1);
  }
  for (; d + 8 <= D; d += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; d < D; d++) s += a[d] * b[d];
  return s;
}

__attribute__((target("avx2,fma"))) inline void axpy_avx2(float* y, float a, const float* x, int D) {
  const __m256 av = _mm256_set1_ps(a);
  int d = 0;
  for (; d + 8 <= D; d += 8) _mm256_storeu_ps(y + d, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + d), _mm256_loadu_ps(y + d)));
  for (; d < D; d++) y[d] += a * x[d];
}
#endif

inline float dot_portable(const float* a, const float* b, int D) {
  float s = 0.f;
  for (int d = 0; d < D; d++) s += a[d] * b[d];
  return s;
}

inline void axpy_portable(float* y, float a, const float* x, int D) {
  for (int d = 0; d < D; d++) y[d] += a * x[d];
}

template <bool AVX>
void attention_impl(const float* q, float* out, const float* kCache, const float* vCache, const int32_t* blockTable,
                    int qStart, int qLen, int startPos, int B, int Hq, int Hkv, int D, float scale, int window,
                    float* scores) {
  const int group = Hq / Hkv;
  const size_t kvRow = static_cast<size_t>(Hkv) * D;
  for (int i = 0; i < qLen; i++) {
    const int pos = startPos + i;
    const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
    const float* qRow = q + static_cast<size_t>(qStart + i) * Hq * D;
    float* oRow = out + static_cast<size_t>(qStart + i) * Hq * D;
    for (int h = 0; h < Hq; h++) {
      const size_t kvh = static_cast<size_t>(h / group) * D;
      const float* qh = qRow + static_cast<size_t>(h) * D;
      float mx = -INFINITY;
      for (int j = lo; j <= pos; j++) {
        const size_t slot = static_cast<size_t>(blockTable[j / B]) * B + (j % B);
        const float* kp = kCache + slot * kvRow + kvh;
        float s;
#if defined(__x86_64__) || defined(_M_X64)
        if constexpr (AVX) s = dot_avx2(qh, kp, D); else s = dot_portable(qh, kp, D);
#else
        s = dot_portable(qh, kp, D);
#endif
        s *= scale;
        scores[j - lo] = s;
        mx = std::max(mx, s);
      }
      float sum = 0.f;
      for (int j = 0; j <= pos - lo; j++) {
        const float e = std::exp(scores[j] - mx);
        scores[j] = e;
        sum += e;
      }
      const float inv = 1.f / sum;
      float* oh = oRow + static_cast<size_t>(h) * D;
      std::fill(oh, oh + D, 0.f);
      for (int j = lo; j <= pos; j++) {
        const size_t slot = static_cast<size_t>(blockTable[j / B]) * B + (j % B);
        const float* vp = vCache + slot * kvRow + kvh;
#if defined(__x86_64__) || defined(_M_X64)
        if constexpr (AVX) axpy_avx2(oh, scores[j - lo] * inv, vp, D); else axpy_portable(oh, scores[j - lo] * inv, vp, D);
#else
        axpy_portable(oh, scores[j - lo] * inv, vp, D);
#endif
      }
    }
  }
}

}  // namespace

bool has_avx2() { return kAvx2; }

void linear(const float* x, const float* w, float* out, int T, int K, int N, const float* bias) {
#if defined(__x86_64__) || defined(_M_X64)
  if (kAvx2) return linear_avx2(x, w, out, T, K, N, bias);
#endif
  linear_portable(x, w, out, T, K, N, bias);
}

void attention_seq(const float* q, float* out, const float* kCache, const float* vCache, const int32_t* blockTable,
                   int qStart, int qLen, int startPos, int B, int Hq, int Hkv, int D, float scale, int window,
                   float* scores) {
  if (kAvx2)
    attention_impl<true>(q, out, kCache, vCache, blockTable, qStart, qLen, startPos, B, Hq, Hkv, D, scale, window, scores);
  else
    attention_impl<false>(q, out, kCache, vCache, blockTable, qStart, qLen, startPos, B, Hq, Hkv, D, scale, window, scores);
}

}  // namespace dispatch_cpu
