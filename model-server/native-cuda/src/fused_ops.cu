// q/k norm + clip + RoPE + KV write, post-attention norm + router logits, and MoE combine +
// residual + next RMSNorm (see fused_ops.h). Each computes the formulas of the kernels it replaces
// (same fp32 expressions, same bf16 rounding points) except for the order of fp32 sums, and
// norm_router's logit, inv_rms * sum(W * norm_w * x) where the separate kernels compute
// sum(W * (norm_w * (x * inv_rms))): equal up to fp32 rounding.
#include <cstdlib>
#include "check.h"
#include "fused_ops.h"
#include "pdl.h"

namespace dcuda {
namespace {

constexpr int kPostThreads = 512;  // a decode token is one CTA: more threads, shorter chain
constexpr size_t kMaxStaticSmem = 48 * 1024;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum of v over the CTA (blockDim.x a multiple of 32, <= 1024); every thread gets the total.
__device__ __forceinline__ float block_sum(float v, float* part /* [32] shared */) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  v = warp_sum(v);
  __syncthreads();  // part may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  float s = lane < int(blockDim.x >> 5) ? part[lane] : 0.f;
  return warp_sum(s);
}

// One CTA per token; the token's q|k|v row staged in shared memory (fp32), followed by one
// inverse RMS per head (mode 1) or two (mode 2: q, k).
__global__ void __launch_bounds__(kPostThreads) qkv_post_kernel(QkvPostArgs a) {
  extern __shared__ float s[];
  __shared__ float part[32];
  pdl_trigger();
  pdl_wait();
  const int t = blockIdx.x;
  const int D = a.D, heads = a.Hq + a.Hkv, QK = heads * D, QD = a.Hq * D, W = a.Hkv * D, ld = QK + W;
  float* row = a.qkv + size_t(t) * ld;
  float* inv = s + ld;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, nw = blockDim.x >> 5;
  for (int c = tid; c < ld; c += blockDim.x) s[c] = row[c];
  __syncthreads();
  if (a.qk_norm == 1) {
    for (int h = warp; h < heads; h += nw) {
      float ss = 0.f;
      for (int i = lane; i < D; i += 32) ss += s[h * D + i] * s[h * D + i];
      ss = warp_sum(ss);
      if (lane == 0) inv[h] = 1.f / sqrtf(ss / float(D) + a.eps);
    }
  } else if (a.qk_norm == 2) {
    float sq = 0.f, sk = 0.f;
    for (int c = tid; c < QK; c += blockDim.x) {
      const float v = s[c] * s[c];
      if (c < QD) sq += v;
      else sk += v;
    }
    sq = block_sum(sq, part);
    sk = block_sum(sk, part);
    if (tid == 0) {
      inv[0] = 1.f / sqrtf(sq / float(QD) + a.eps);
      inv[1] = 1.f / sqrtf(sk / float(W) + a.eps);
    }
  }
  __syncthreads();
  const float clip = a.clip;
  if (a.qk_norm != 0 || clip > 0.f) {
    for (int c = tid; c < ld; c += blockDim.x) {
      float v = s[c];
      if (a.qk_norm != 0 && c < QK) {
        const bool is_q = c < QD;
        float f, w;
        if (a.qk_norm == 1) {
          f = inv[c / D];
          w = is_q ? a.q_norm[c % D] : a.k_norm[c % D];
        } else {
          f = inv[is_q ? 0 : 1];
          w = is_q ? a.q_norm[c] : a.k_norm[c - QD];
        }
        v = w * (v * f);
      }
      if (clip > 0.f) v = fminf(clip, fmaxf(-clip, v));
      s[c] = v;
    }
    __syncthreads();
  }
  const int half = D / 2;
  const float p = float(a.pos[t]);
  const int slot = a.slots[t];
  for (int idx = tid; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    const float angle = p * a.inv_freq[i];
    float sn, cs;
    sincosf(angle, &sn, &cs);
    const float x0 = s[h * D + i], x1 = s[h * D + i + half];
    const float r0 = x0 * cs - x1 * sn;
    const float r1 = x1 * cs + x0 * sn;
    if (h < a.Hq) {
      row[h * D + i] = r0;
      row[h * D + i + half] = r1;
    } else if (slot >= 0) {
      bf16* kc = a.k_cache + size_t(slot) * W + size_t(h - a.Hq) * D;
      kc[i] = __float2bfloat16(r0);
      kc[i + half] = __float2bfloat16(r1);
    }
  }
  if (slot >= 0)
    for (int c = tid; c < W; c += blockDim.x) a.v_cache[size_t(slot) * W + c] = __float2bfloat16(s[QK + c]);
}

size_t qkv_post_smem(int Hq, int Hkv, int D) { return size_t((Hq + 2 * Hkv) * D + Hq + Hkv) * sizeof(float); }

// One CTA per token, 8 columns per thread and pass (H % 8 == 0).
__global__ void __launch_bounds__(256) moe_combine_norm_kernel(const uint4* __restrict__ Y,
                                                               const int32_t* __restrict__ slot_row,
                                                               const float* __restrict__ weights, int k, int vecs,
                                                               const float* __restrict__ shared,
                                                               const float* __restrict__ gate, float* __restrict__ x,
                                                               const float* __restrict__ norm_w, float eps,
                                                               bf16* __restrict__ out) {
  __shared__ float part[32];
  pdl_trigger();
  pdl_wait();
  const int t = blockIdx.x, H = vecs * 8;
  const float g = gate ? 1.f / (1.f + expf(-gate[t])) : 1.f;
  float4* xr = reinterpret_cast<float4*>(x + size_t(t) * H);
  const float4* sh = shared ? reinterpret_cast<const float4*>(shared + size_t(t) * H) : nullptr;
  float ss = 0.f;
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < k; ++j) {
      const float w = weights[size_t(t) * k + j];
      const uint4 y = Y[size_t(slot_row[size_t(t) * k + j]) * vecs + v];
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(p[i]);
        acc[2 * i] += w * f.x;
        acc[2 * i + 1] += w * f.y;
      }
    }
    float r[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = __bfloat162float(__float2bfloat16(acc[i]));  // unpermute's bf16 output
    if (sh) {
      const float4 s0 = sh[2 * v], s1 = sh[2 * v + 1];
      r[0] += g * s0.x, r[1] += g * s0.y, r[2] += g * s0.z, r[3] += g * s0.w;
      r[4] += g * s1.x, r[5] += g * s1.y, r[6] += g * s1.z, r[7] += g * s1.w;
    }
    float4 x0 = xr[2 * v], x1 = xr[2 * v + 1];
    x0.x += r[0], x0.y += r[1], x0.z += r[2], x0.w += r[3];
    x1.x += r[4], x1.y += r[5], x1.z += r[6], x1.w += r[7];
    xr[2 * v] = x0, xr[2 * v + 1] = x1;
    ss += x0.x * x0.x + x0.y * x0.y + x0.z * x0.z + x0.w * x0.w + x1.x * x1.x + x1.y * x1.y + x1.z * x1.z +
          x1.w * x1.w;
  }
  if (!norm_w) return;  // uniform across the CTA
  ss = block_sum(ss, part);
  const float inv = 1.f / sqrtf(ss / float(H) + eps);
  const float4* wv = reinterpret_cast<const float4*>(norm_w);
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    const float4 x0 = xr[2 * v], x1 = xr[2 * v + 1];
    const float4 w0 = wv[2 * v], w1 = wv[2 * v + 1];
    uint4 o;
    __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(&o);
    q[0] = __floats2bfloat162_rn(w0.x * (x0.x * inv), w0.y * (x0.y * inv));
    q[1] = __floats2bfloat162_rn(w0.z * (x0.z * inv), w0.w * (x0.w * inv));
    q[2] = __floats2bfloat162_rn(w1.x * (x1.x * inv), w1.y * (x1.y * inv));
    q[3] = __floats2bfloat162_rn(w1.z * (x1.z * inv), w1.w * (x1.w * inv));
    reinterpret_cast<uint4*>(out + size_t(t) * H)[v] = o;
  }
}

// CTA (128 threads) per expert row: one pass over W's row, norm_w and x accumulates both the
// dot with norm_w * x and the sum of squares of x for each of the TT tokens.
template <int TT>
__global__ void __launch_bounds__(128) norm_router_kernel(const float* __restrict__ x, int T, int H,
                                                           const float* __restrict__ norm_w, float eps,
                                                           const float* __restrict__ W, int E,
                                                           float* __restrict__ logits, float* __restrict__ h,
                                                           bf16* __restrict__ hb, int cols) {
  __shared__ float part[2][TT][4];
  __shared__ float s_inv[TT];
  pdl_trigger();
  pdl_wait();
  const int n = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float dot[TT], ss[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) dot[t] = 0.f, ss[t] = 0.f;
  const float4* w4 = reinterpret_cast<const float4*>(W + size_t(n) * H);
  const float4* g4 = reinterpret_cast<const float4*>(norm_w);
  const int kv = H / 4;
#pragma unroll 2
  for (int c = tid; c < kv; c += 128) {
    const float4 w = __ldg(w4 + c), g = __ldg(g4 + c);
    const float4 wg = make_float4(w.x * g.x, w.y * g.y, w.z * g.z, w.w * g.w);
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t >= T) break;
      const float4 v = __ldg(reinterpret_cast<const float4*>(x + size_t(t) * H) + c);
      dot[t] += wg.x * v.x + wg.y * v.y + wg.z * v.z + wg.w * v.w;
      ss[t] += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    const float d = warp_sum(dot[t]), q = warp_sum(ss[t]);
    if (lane == 0) part[0][t][warp] = d, part[1][t][warp] = q;
  }
  __syncthreads();
  if (tid < TT && tid < T) {
    const float q = (part[1][tid][0] + part[1][tid][1]) + (part[1][tid][2] + part[1][tid][3]);
    const float inv = 1.f / sqrtf(q / float(H) + eps);
    s_inv[tid] = inv;
    const float d = (part[0][tid][0] + part[0][tid][1]) + (part[0][tid][2] + part[0][tid][3]);
    logits[size_t(tid) * E + n] = d * inv;
  }
  __syncthreads();
  // this CTA's columns of h and hb, computed as rms_norm computes them
  const int c0 = n * cols;
  for (int i = tid; i < T * cols; i += 128) {
    const int t = i / cols, c = c0 + i % cols;
    if (c >= H) continue;
    const float y = norm_w[c] * (x[size_t(t) * H + c] * s_inv[t]);
    h[size_t(t) * H + c] = y;
    hb[size_t(t) * H + c] = __float2bfloat16(y);
  }
}

}  // namespace

bool legacy_kernels() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_UNFUSED");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}

bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_PDL");
    return !legacy_kernels() && !(v != nullptr && v[0] == '0');
  }();
  return on;
}

bool qkv_post_supported(int Hq, int Hkv, int D) {
  return D % 2 == 0 && Hq > 0 && Hkv > 0 && qkv_post_smem(Hq, Hkv, D) <= kMaxStaticSmem - 32 * sizeof(float);
}

void qkv_post(const QkvPostArgs& a, cudaStream_t s) {
  DC_CHECK(qkv_post_supported(a.Hq, a.Hkv, a.D), "qkv_post: q|k|v row too large for shared memory");
  DC_CHECK(a.qk_norm >= 0 && a.qk_norm <= 2, "qkv_post: qk_norm must be 0, 1 or 2");
  if (a.T == 0) return;
  launch_k(qkv_post_kernel, dim3(a.T), dim3(kPostThreads), qkv_post_smem(a.Hq, a.Hkv, a.D), s, a);
  DC_LAUNCHED();
}

void norm_router(const float* x, int T, int H, const float* norm_w, float eps, const float* W, int E, float* logits,
                 float* h, bf16* hb, cudaStream_t s) {
  DC_CHECK(T >= 1 && T <= kNormRouterMaxTokens, "norm_router: 1 to 16 tokens");
  DC_CHECK(H % 4 == 0 && E > 0, "norm_router: H must be a multiple of 4");
  const int cols = (H + E - 1) / E;
  auto kernel = T == 1 ? norm_router_kernel<1>
                : T == 2 ? norm_router_kernel<2>
                : T <= 4 ? norm_router_kernel<4>
                : T <= 8 ? norm_router_kernel<8>
                         : norm_router_kernel<16>;
  launch_k(kernel, dim3(E), dim3(128), 0, s, x, T, H, norm_w, eps, W, E, logits, h, hb, cols);
  DC_LAUNCHED();
}

void moe_combine_norm(const bf16* Y, const int32_t* slot_row, const float* weights, int T, int k, int H,
                      const float* shared, const float* gate, float* x, const float* norm_w, float eps,
                      bf16* out_bf16, cudaStream_t s) {
  DC_CHECK(H % 8 == 0, "moe_combine_norm: H must be a multiple of 8");
  DC_CHECK(!norm_w || out_bf16, "moe_combine_norm: a norm needs an output");
  if (T == 0) return;
  const int vecs = H / 8;
  const int threads = vecs >= 256 ? 256 : vecs >= 128 ? 128 : vecs > 32 ? 64 : 32;
  launch_k(moe_combine_norm_kernel, dim3(T), dim3(threads), 0, s, reinterpret_cast<const uint4*>(Y), slot_row, weights,
           k, vecs, shared, gate, x, norm_w, eps, out_bf16);
  DC_LAUNCHED();
}

}  // namespace dcuda
