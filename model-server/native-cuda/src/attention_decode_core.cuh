// Shared by the decode attention kernel's files (attention_decode.cu has the algorithm): its
// constants, the MMA and bf16 helpers, the key range of a split, the shared-memory budget of the
// warps' merge, the 8-dim weighted sum both merges run, and the NB dispatch of the launchers.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>
#include <type_traits>
#include "attention_decode.cuh"

namespace dcuda {
namespace decode_attn {

constexpr int kWarps = 4;         // split-K kernel (global partials)
constexpr int kClusterWarps = 8;  // cluster kernel: one CTA of 8 warps per SM at NB 4 (232 registers)
constexpr int kMaxCluster = 8;    // portable thread-block cluster size
constexpr int kBlockKeys = 16;    // keys per warp step
constexpr int kMaxSplits = 64;
constexpr int kMaxGroup = 16;  // MMA rows
constexpr int kMaxDim = 256;
constexpr int kMergeChunk = 8;  // up to this many splits, the merging CTA loads all partials in one go
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Thread (r = lane / 4, c = lane % 4) holds x = M[r][2c .. 2c+1] of an 8x8 bf16 matrix M; returns
// M^T[r][2c .. 2c+1] = (M[2c][r], M[2c+1][r]).
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float lo_f(uint32_t x) { return __uint_as_float(x << 16); }
__device__ __forceinline__ float hi_f(uint32_t x) { return __uint_as_float(x & 0xffff0000u); }

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// acc += w * (x, y): one part's 8 dims of an item, weighted (the merges sum the parts in split order).
__device__ __forceinline__ void add_weighted8(float (&acc)[8], const float4& x, const float4& y, float w) {
  acc[0] += x.x * w, acc[1] += x.y * w, acc[2] += x.z * w, acc[3] += x.w * w;
  acc[4] += y.x * w, acc[5] += y.y * w, acc[6] += y.z * w, acc[7] += y.w * w;
}

// The output of an item: query head g of KV head kvh, dims [d, d + 8) of token t, as acc * inv in bf16.
__device__ __forceinline__ void store_out8(const AttentionArgs& a, int D, int G, int t, int kvh, int g, int d,
                                           const float (&acc)[8], float inv) {
  uint4 v;
  v.x = pack_bf16(acc[0] * inv, acc[1] * inv), v.y = pack_bf16(acc[2] * inv, acc[3] * inv);
  v.z = pack_bf16(acc[4] * inv, acc[5] * inv), v.w = pack_bf16(acc[6] * inv, acc[7] * inv);
  *reinterpret_cast<uint4*>(a.out + size_t(t) * a.Hq * D + (size_t(kvh) * G + g) * D + d) = v;
}

// The warps' merge: with a shared slab per warp (W x G x D floats) when that fits in the default
// 48 KB of shared memory with the rest (4 warps: G x D <= 2048 floats, G 16 at D 128, G 8 at D 256;
// 8 warps of the cluster kernel: G x D <= 1492, G 8 at D 128), so all warps write at once; else
// one shared [G, D] that the warps add to in turn.
template <int W, bool kCluster, bool kFused = false>
__host__ __device__ __forceinline__ bool merge_slabs(int G, int D) {
  // split-K: s_ml, s_inv, s_last (and spare); cluster: s_cml, s_last (and spare); kFused: s_new, s_raw
  constexpr int kStatic =
      (kCluster ? kMaxGroup * 8 + 256 : kMaxSplits * kMaxGroup * 8 + 256) + (kFused ? 2 * kMaxDim * (2 + 4) : 0);
  return (2 * W * 16 + W * G * D) * 4 + kStatic <= 48 * 1024;
}

// Dynamic shared memory of a W-warp CTA: s_m and s_l [W][16], s_o [W or 1][G][D] floats.
template <int W, bool kCluster, bool kFused>
inline size_t smem_bytes(int G, int D) {
  return (size_t(2) * W * 16 + size_t(merge_slabs<W, kCluster, kFused>(G, D) ? W : 1) * G * D) * sizeof(float);
}

// The key range [lo, pos] of a token and the part of it that split `split` of `nsplit` covers.
struct Split {
  int lo, hi, active;  // keys [lo, hi]; active = splits that hold keys (hi < lo when this one holds none)
};
// A split holds 16 W keys at least (a block for each of its W warps).
template <int W>
__device__ __forceinline__ Split split_of(const AttentionArgs& a, int t, int split, int nsplit) {
  const int pos = a.pos[t];
  const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  const int len = pos - first + 1;
  int chunk = (len + nsplit - 1) / nsplit;
  chunk = max(kBlockKeys * W, (chunk + kBlockKeys - 1) / kBlockKeys * kBlockKeys);
  Split s;
  s.active = (len + chunk - 1) / chunk;
  s.lo = first + split * chunk;
  s.hi = min(pos, s.lo + chunk - 1);
  return s;
}

// f(std::integral_constant<int, NB>{}) for NB = ceil(D / 32).
template <typename F>
auto with_nb(int D, F&& f) {
  switch ((D + 31) / 32) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

// The two merge paths' launchers (attention_decode_splitk.cu, attention_decode_cluster.cu), for
// attention_decode.cu's dispatch. kFused: p as attention_decode_qkv takes it; else p is unused.
// CTAs that fill the device with the split-K kernel (2 per SM), from the stream's workspace record.
int target_ctas(cudaStream_t s, int G, int D);
// The split-K path: S = round(target CTAs / (T * Hkv)) splits, partials in the stream's workspace.
void launch_splitk(const AttentionArgs& a, const QkvPostArgs& p, bool fused, cudaStream_t s);
// The cluster size for this step, 0 where the step takes the split-K path.
// The split-K path's CTAs per SM (DISPATCH_CUDA_ATTN_CTAS_PER_SM, default 2).
int ctas_per_sm();
int cluster_splits(const AttentionArgs& a, bool fused, cudaStream_t s);
// One cluster of nsplit (from cluster_splits) CTAs per (token, KV head).
void launch_cluster(const AttentionArgs& a, const QkvPostArgs& p, bool fused, int nsplit, cudaStream_t s);

}  // namespace decode_attn
}  // namespace dcuda
