// Paged causal attention (see ops.h). attention() sends steps of few tokens to the flash-decoding
// kernel (attention_decode.cu) and everything else to the kernel below.
//
// One CTA per (query token, query head); its warps (16 for decode-sized steps, 8 for prefill) split the keys in rounds of kUnroll and each
// keeps an online softmax (running max m, sum l, weighted values acc) in fp32; the warps merge
// through shared memory at the end. Lanes split the head dim (D <= 32 * kMaxDimPerLane).
// Keys are read through the sequence's block table, so prefill and decode share the kernel and
// a graph captured for a batch size reads whatever positions and tables the step uploaded.
#include <cfloat>
#include <cstdlib>
#include "check.h"
#include "attention_decode.cuh"
#include "ops.h"

namespace dcuda {
namespace {

constexpr int kWarps = 16;        // most warps per CTA (shared-memory sizing)
constexpr int kDecodeTokens = 64;  // steps of up to this many tokens use kWarps warps, longer ones 8
constexpr int kMaxDimPerLane = 8;  // D <= 256
constexpr int kUnroll = 4;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  const int nw = blockDim.x >> 5;
  const int t = blockIdx.x;
  const int h = blockIdx.y;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int kvh = h / (a.Hq / a.Hkv);
  const int pos = a.pos[t];
  const int32_t* table = a.tables + size_t(a.tok_seq[t]) * a.table_stride;
  const int lo = a.window > 0 ? max(0, pos - a.window + 1) : 0;

  float q[kMaxDimPerLane], acc[kMaxDimPerLane];
#pragma unroll
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int d = lane + 32 * i;
    q[i] = d < a.D ? a.q[size_t(t) * a.ldq + size_t(h) * a.D + d] : 0.f;
    acc[i] = 0.f;
  }
  // Each warp takes kUnroll consecutive keys per round, so their K and V loads are in flight
  // together (one round trip to memory per round instead of per key).
  float m = -FLT_MAX, l = 0.f;
  for (int j0 = lo + warp * kUnroll; j0 <= pos; j0 += nw * kUnroll) {
    size_t base[kUnroll];
    float s[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = min(j0 + u, pos);  // past pos: reread pos, masked below
      base[u] = ((size_t(table[j / a.B]) * a.B + j % a.B) * a.Hkv + kvh) * a.D;
      s[u] = 0.f;
#pragma unroll
      for (int i = 0; i < kMaxDimPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < a.D) s[u] += q[i] * __bfloat162float(a.k_cache[base[u] + d]);
      }
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      s[u] = j0 + u <= pos ? warp_sum(s[u]) * a.scale : -FLT_MAX;
      m_new = fmaxf(m_new, s[u]);
    }
    const float c = expf(m - m_new);
    float e[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) e[u] = j0 + u <= pos ? expf(s[u] - m_new) : 0.f;
    l *= c;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) l += e[u];
#pragma unroll
    for (int i = 0; i < kMaxDimPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d >= a.D) continue;
      float v = acc[i] * c;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v += e[u] * __bfloat162float(a.v_cache[base[u] + d]);
      acc[i] = v;
    }
    m = m_new;
  }

  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][32 * kMaxDimPerLane];
  if (lane == 0) s_m[warp] = m, s_l[warp] = l;
#pragma unroll
  for (int i = 0; i < kMaxDimPerLane; ++i) s_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float mx = -FLT_MAX;
  for (int w = 0; w < nw; ++w) mx = fmaxf(mx, s_m[w]);
  float total = 0.f;
  for (int w = 0; w < nw; ++w) total += s_l[w] * expf(s_m[w] - mx);  // an idle warp has l = 0
  const float inv = total > 0.f ? 1.f / total : 0.f;
  for (int d = threadIdx.x; d < a.D; d += blockDim.x) {
    float o = 0.f;
    for (int w = 0; w < nw; ++w) o += s_acc[w][d] * expf(s_m[w] - mx);
    a.out[size_t(t) * a.Hq * a.D + size_t(h) * a.D + d] = __float2bfloat16(o * inv);
  }
}

}  // namespace

void attention(const AttentionArgs& a, cudaStream_t s) {
  DC_CHECK(a.Hkv > 0 && a.Hq % a.Hkv == 0, "query heads must be a multiple of KV heads");
  if (a.T == 0) return;
  // DISPATCH_CUDA_ATTN_PER_HEAD=1: the per-head kernel for every step (A/B against the decode kernel)
  static const bool per_head_only = [] {
    const char* v = std::getenv("DISPATCH_CUDA_ATTN_PER_HEAD");
    return v && v[0] == '1';
  }();
  if (!per_head_only && attention_decode_supported(a)) {
    attention_decode(a, s);
  } else {
    attention_per_head(a, s);
  }
}

void attention_per_head(const AttentionArgs& a, cudaStream_t s) {
  DC_CHECK(a.D <= 32 * kMaxDimPerLane, "head dim above 256");
  DC_CHECK(a.Hkv > 0 && a.Hq % a.Hkv == 0, "query heads must be a multiple of KV heads");
  if (a.T == 0) return;
  // few tokens (decode): every warp on the keys of few (token, head) pairs; many: 8 per CTA
  const int warps = a.T <= kDecodeTokens ? kWarps : 8;
  attention_kernel<<<dim3(a.T, a.Hq), warps * 32, 0, s>>>(a);
  DC_LAUNCHED();
}

}  // namespace dcuda
