// Flash-decoding paged attention for steps of few query tokens (attention_decode.cuh).
//
// Legend: T query tokens, Hkv KV heads, G = Hq / Hkv query heads per KV head (1..16), D head dim
// (multiple of 8, <= 256), B block size, S splits of one token's keys.
//
// One CTA per (split, KV head, token), 4 warps. The CTA serves all G query heads of its KV head,
// so each K/V row is read once per token (the per-head kernel read it G times). The token's keys
// [lo, pos] (lo from the sliding window) are cut into S contiguous splits when T * Hkv CTAs alone
// would not fill the GPU; a split's warps take 16-key blocks in turn.
//
// Per 16-key block a warp runs two m16n8k16 bf16 MMAs per 16 dims (fp32 accumulate):
//   S[16 x 16] = Q[16 x D] K^T   rows = query heads (G of 16 used), keys through the block table
//   O[16 x D] += P[16 x 16] V    P = exp2(S - m) (bf16 hi + lo for D <= 128), the S accumulators reused as the A operand
// Every lane loads whole 16-byte pieces (8 bf16) of K and V rows straight from global memory into
// MMA fragments, no shared memory:
//   - the dot product may sum the head dims in any order, so the 8 dims a lane loads are spread
//     over two k16 steps (Q's fragments built with the same order);
//   - V is needed transposed (pairs of keys per register): each loaded register is one 8x8 tile
//     fragment and `movmatrix.trans` transposes it in registers; the output dims come out
//     permuted the same way, so each lane ends holding 8 consecutive dims of its rows.
// Online softmax per query head in fp32 (log2 domain: q is pre-scaled by scale * log2(e)). For
// D <= 128, q and P enter the MMAs as two bf16 parts each (hi = bf16(x), lo = bf16(x - hi)), so
// about 16 bits of each survive and l sums the fp32 P; above 128 (registers) they are rounded to
// bf16 once and l sums the same rounded P that multiplies V. The warps merge their
// (m, l, O) through shared memory. With one split the CTA writes the bf16 output; otherwise it
// writes its (m, l, O) to the stream's workspace and the last CTA of the token's splits to arrive
// (atomic counter, reset by that CTA so graph replays find it at zero) merges them. The workspace
// is per (device, stream), fixed-size (2 x 2 SMs x G x D fp32 partials: 2.2 MB at G 8, D 128 on
// 132 SMs) and never freed (graphs captured on the stream keep its address).
// Cluster path (the default where the step splits at all): the nsplit <= 8 CTAs of one (token, KV
// head), 8 warps each, form a thread-block cluster; each leaves its (M, L, O) part in its own
// shared memory and, after a cluster barrier, the cluster's CTAs merge the parts through
// distributed shared memory and write the output: no workspace, no counter, no second pass over
// global memory, nothing to reset between graph replays. The split-K path above stays for steps
// the cluster path leaves (one split, a device that cannot co-schedule the clusters) and for
// DISPATCH_CUDA_ATTN_CLUSTER=0.
// Launched with programmatic dependent launch (pdl.h): a CTA reads pos, tok_seq and its first
// block-table entries (step metadata) and prefetches its warps' first K/V rows to L2 before
// griddepcontrol.wait, reads q and the caches after it; each warp prefetches its next block's
// rows to L2 while it computes the current one.
// attention_decode_qkv runs the kFused instantiations: qkv_post's work in each CTA's prologue
// (attention_decode_qkv.cuh).
// Files: attention_decode_core.cuh (constants, helpers, a split's key range), _kernel.cuh (the
// kernel, ending in the split-K last-CTA merge), _splitk.cu (the workspace, the launch),
// _cluster.cuh / _cluster.cu (the DSMEM merge, the cluster size and launch); this file picks the path.
#include <cstdint>
#include <cstdlib>
#include <string>
#include "attention_decode.cuh"
#include "attention_decode_core.cuh"
#include "check.h"
#include "fused_ops.h"

namespace dcuda {
namespace {

using decode_attn::kMaxDim;
using decode_attn::kMaxGroup;

// DISPATCH_CUDA_ATTN_CLUSTER=0: the split-K path for every step (A/B against the cluster path).
bool cluster_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DISPATCH_CUDA_ATTN_CLUSTER");
    return !(v != nullptr && v[0] == '0');
  }();
  return on;
}

// attention_decode and attention_decode_qkv: the cluster path where the step splits its keys,
// else split-K. kFused: p as attention_decode_qkv takes it; else p is unused.
template <bool kFused>
void run_decode(const AttentionArgs& a, const QkvPostArgs& p, cudaStream_t s, DecodeMerge merge) {
  if (a.T == 0) return;
  if (merge == DecodeMerge::kAuto && a.long_context && attention_decode_long_split_k(a.T, a.Hkv))
    merge = DecodeMerge::kWorkspace;
  if (merge == DecodeMerge::kCluster || (merge == DecodeMerge::kAuto && cluster_enabled())) {
    const int nsplit = decode_attn::cluster_splits(a, kFused, s);
    if (nsplit >= 2) {
      decode_attn::launch_cluster(a, p, kFused, nsplit, s);
      DC_LAUNCHED();
      return;
    }
  }
  decode_attn::launch_splitk(a, p, kFused, s);
  DC_LAUNCHED();
}

}  // namespace

int attention_long_context() {
  static const int v = [] {
    const char* e = std::getenv("DISPATCH_CUDA_ATTN_LONG_CONTEXT");
    if (!e || !*e) return kAttentionLongContext;
    const long n = std::strtol(e, nullptr, 10);
    DC_CHECK(n >= 0 && n <= (1L << 30), std::string("DISPATCH_CUDA_ATTN_LONG_CONTEXT must be 0 or a position, got ") + e);
    return int(n);
  }();
  return v;
}

bool attention_decode_long_split_k(int T, int Hkv) {
  return size_t(T) * Hkv * decode_attn::kMaxCluster * 2 <= size_t(current_device_sms());
}

int attention_decode_max_tokens() {
  static const int max_tokens = [] {
    const char* v = std::getenv("DISPATCH_CUDA_ATTN_DECODE_MAX_TOKENS");
    if (!v || !*v) return kAttentionDecodeMaxTokens;
    const long n = std::strtol(v, nullptr, 10);
    DC_CHECK(n >= 1 && n <= 65535, std::string("DISPATCH_CUDA_ATTN_DECODE_MAX_TOKENS must be in 1..65535, got ") + v);
    return int(n);
  }();
  return max_tokens;
}

bool attention_decode_supported(const AttentionArgs& a) {
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return a.T >= 0 && a.T <= attention_decode_max_tokens() && a.D > 0 && a.D % 8 == 0 && a.D <= kMaxDim && a.Hkv > 0 &&
         a.Hq % a.Hkv == 0 && a.Hq / a.Hkv <= kMaxGroup && a.B > 0 && aligned(a.k_cache) && aligned(a.v_cache) &&
         aligned(a.out) && aligned(a.q) && a.ldq % 4 == 0;
}

bool attention_decode_qkv_supported(const AttentionArgs& a, const QkvPostArgs& p) {
  return attention_decode_supported(a) && p.qkv != nullptr && (reinterpret_cast<uintptr_t>(p.qkv) & 15) == 0 &&
         p.T == a.T && p.Hq == a.Hq && p.Hkv == a.Hkv &&
         p.D == a.D && (p.qk_norm == 0 || (p.qk_norm == 1 && p.q_norm && p.k_norm)) && p.pos == a.pos &&
         p.inv_freq != nullptr && p.slots != nullptr && p.k_cache == a.k_cache && p.v_cache == a.v_cache;
}

int attention_decode_cluster_size(const AttentionArgs& a, cudaStream_t s) {
  if (a.T <= 0 || !attention_decode_supported(a)) return 0;
  return decode_attn::cluster_splits(a, false, s);
}

void attention_decode(const AttentionArgs& a, cudaStream_t s, DecodeMerge merge) {
  DC_CHECK(attention_decode_supported(a), "decode attention: shape not supported (T <= attention_decode_max_tokens(), D % 8 == 0, D <= 256, "
                                          "Hq / Hkv <= 16, 16-byte aligned q, caches and output, ldq % 4 == 0)");
  run_decode<false>(a, QkvPostArgs{}, s, merge);
}

void attention_decode_qkv(const AttentionArgs& a, const QkvPostArgs& p, cudaStream_t s, DecodeMerge merge) {
  DC_CHECK(attention_decode_qkv_supported(a, p),
           "decode attention with q/k norm + RoPE + KV write: shape not supported (attention_decode's shapes, "
           "qk_norm 0 or 1, p and a on the same step, pos and caches)");
  run_decode<true>(a, p, s, merge);
}

}  // namespace dcuda
