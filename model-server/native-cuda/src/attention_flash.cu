// Tiled causal attention for prefill chunks on tensor cores (opt-in: DISPATCH_CUDA_FLASH=1 until
// it is checked on the GPU against attention.cu; see docs/cuda-backend.md).
//
// One CTA per (tile of up to 32 consecutive query rows of one sequence, query head). Keys go
// through shared memory 32 at a time, read through the block table: S = Q K^T (WMMA bf16,
// fp32 accumulate), an online softmax per row in fp32 (causal and window masks from each row's
// position), P in bf16, O += P V (WMMA, fp32 accumulators kept in shared memory so each row can
// be rescaled when its running max moves). Legend: BQ query rows, BK keys per block, D head dim.
#include <cfloat>
#include <mma.h>
#include "check.h"
#include "ops.h"

namespace dcuda {
namespace {

constexpr int kBQ = 32, kBK = 32, kThreads = 128;

struct Smem {
  int ld_qkv;  // bf16 row stride of sQ, sK, sV (D + 8)
  int ld_o;    // fp32 row stride of sO (D + 4)
  size_t q, k, v, s, p, o, m, l, c, pos, bytes;
};

__host__ __device__ inline size_t align128(size_t x) { return (x + 127) & ~size_t(127); }

__host__ __device__ inline Smem layout(int D) {
  Smem m{};
  m.ld_qkv = D + 8;
  m.ld_o = D + 4;
  size_t at = 0;
  m.q = at, at = align128(at + size_t(kBQ) * m.ld_qkv * 2);
  m.k = at, at = align128(at + size_t(kBK) * m.ld_qkv * 2);
  m.v = at, at = align128(at + size_t(kBK) * m.ld_qkv * 2);
  m.s = at, at = align128(at + size_t(kBQ) * (kBK + 4) * 4);
  m.p = at, at = align128(at + size_t(kBQ) * (kBK + 8) * 2);
  m.o = at, at = align128(at + size_t(kBQ) * m.ld_o * 4);
  m.m = at, at = align128(at + kBQ * 4);
  m.l = at, at = align128(at + kBQ * 4);
  m.c = at, at = align128(at + kBQ * 4);
  m.pos = at, at = align128(at + kBQ * 4);
  m.bytes = at;
  return m;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(kThreads) attention_flash_kernel(AttentionArgs a, const int32_t* __restrict__ tiles) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char smem[];
  const int D = a.D;
  const Smem L = layout(D);
  bf16* sQ = reinterpret_cast<bf16*>(smem + L.q);
  bf16* sK = reinterpret_cast<bf16*>(smem + L.k);
  bf16* sV = reinterpret_cast<bf16*>(smem + L.v);
  float* sS = reinterpret_cast<float*>(smem + L.s);
  bf16* sP = reinterpret_cast<bf16*>(smem + L.p);
  float* sO = reinterpret_cast<float*>(smem + L.o);
  float* sM = reinterpret_cast<float*>(smem + L.m);
  float* sL = reinterpret_cast<float*>(smem + L.l);
  float* sC = reinterpret_cast<float*>(smem + L.c);
  int* sPos = reinterpret_cast<int*>(smem + L.pos);
  const int ldq = L.ld_qkv, ldo = L.ld_o, lds = kBK + 4, ldp = kBK + 8;

  const int r0 = tiles[2 * blockIdx.x], nq = tiles[2 * blockIdx.x + 1];
  const int h = blockIdx.y, kvh = h / (a.Hq / a.Hkv);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t* table = a.tables + size_t(a.tok_seq[r0]) * a.table_stride;

  for (int i = threadIdx.x; i < kBQ; i += kThreads) {
    sPos[i] = i < nq ? a.pos[r0 + i] : -1;
    sM[i] = -FLT_MAX, sL[i] = 0.f;
  }
  for (int e = threadIdx.x; e < kBQ * D; e += kThreads) {
    const int i = e / D, d = e % D;
    const float q = i < nq ? a.q[size_t(r0 + i) * a.ldq + size_t(h) * D + d] * a.scale : 0.f;
    sQ[i * ldq + d] = __float2bfloat16(q);
    sO[i * ldo + d] = 0.f;
  }
  __syncthreads();
  const int first = sPos[0], last = sPos[nq - 1];
  const int kmin = a.window > 0 ? max(0, first - a.window + 1) : 0;

  for (int kb = kmin; kb <= last; kb += kBK) {
    // K and V rows kb .. kb+31 (zeros past `last`)
    for (int e = threadIdx.x; e < kBK * (D / 8); e += kThreads) {
      const int jj = e / (D / 8), d = (e % (D / 8)) * 8;
      const int j = kb + jj;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (j <= last) {
        const size_t base = ((size_t(table[j / a.B]) * a.B + j % a.B) * a.Hkv + kvh) * D + d;
        kv = *reinterpret_cast<const uint4*>(a.k_cache + base);
        vv = *reinterpret_cast<const uint4*>(a.v_cache + base);
      }
      *reinterpret_cast<uint4*>(sK + jj * ldq + d) = kv;
      *reinterpret_cast<uint4*>(sV + jj * ldq + d) = vv;
    }
    __syncthreads();
    {  // S = Q K^T: warp w owns the 16x16 tile (w / 2, w % 2)
      const int mi = warp >> 1, ni = warp & 1;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < D; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, sQ + (mi * 16) * ldq + kk, ldq);
        wmma::load_matrix_sync(fb, sK + (ni * 16) * ldq + kk, ldq);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(sS + (mi * 16) * lds + ni * 16, acc, lds, wmma::mem_row_major);
    }
    __syncthreads();
    // online softmax: warp w takes rows w*8 .. w*8+7, lane = key column
    for (int i = warp * (kBQ / 4); i < (warp + 1) * (kBQ / 4); ++i) {
      const int p = sPos[i];
      const int j = kb + lane;
      const int lo = a.window > 0 ? p - a.window + 1 : 0;
      const bool valid = p >= 0 && j <= p && j >= lo;
      const float s = valid ? sS[i * lds + lane] : -FLT_MAX;
      const float m_old = sM[i];
      const float m_new = fmaxf(m_old, warp_max(s));
      const float e = valid ? expf(s - m_new) : 0.f;
      const float sum = warp_sum(e);
      sP[i * ldp + lane] = __float2bfloat16(e);
      if (lane == 0) {
        const float c = expf(m_old - m_new);
        sC[i] = c;
        sL[i] = sL[i] * c + sum;
        sM[i] = m_new;
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kBQ * D; e += kThreads) sO[(e / D) * ldo + e % D] *= sC[e / D];
    __syncthreads();
    // O += P V: (2 row tiles) x (D/16 column tiles), spread over the warps
    for (int t = warp; t < 2 * (D / 16); t += kThreads / 32) {
      const int mi = t / (D / 16), nj = t % (D / 16);
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, sO + (mi * 16) * ldo + nj * 16, ldo, wmma::mem_row_major);
      for (int kk = 0; kk < kBK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, sP + (mi * 16) * ldp + kk, ldp);
        wmma::load_matrix_sync(fb, sV + kk * ldq + nj * 16, ldq);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(sO + (mi * 16) * ldo + nj * 16, acc, ldo, wmma::mem_row_major);
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < nq * D; e += kThreads) {
    const int i = e / D, d = e % D;
    const float l = sL[i];
    a.out[size_t(r0 + i) * a.Hq * D + size_t(h) * D + d] = __float2bfloat16(l > 0.f ? sO[i * ldo + d] / l : 0.f);
  }
}

}  // namespace

bool attention_flash_supported(int D) { return D % 16 == 0 && D >= 16 && D <= 128; }

int attention_flash_tile_rows() { return kBQ; }

void attention_flash(const AttentionArgs& a, const int32_t* tiles, int num_tiles, cudaStream_t s) {
  DC_CHECK(attention_flash_supported(a.D), "flash attention needs D % 16 == 0 and D <= 128");
  if (num_tiles == 0) return;
  const Smem L = layout(a.D);
  static bool configured = false;
  if (!configured) {
    DC_CUDA(cudaFuncSetAttribute(attention_flash_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(layout(128).bytes)));
    configured = true;
  }
  attention_flash_kernel<<<dim3(num_tiles, a.Hq), kThreads, L.bytes, s>>>(a, tiles);
  DC_LAUNCHED();
}

}  // namespace dcuda
