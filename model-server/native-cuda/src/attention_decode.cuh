// Paged attention launchers behind attention() (ops.h), declared apart so the standalone check
// (scripts/attention_check.cu) can run each one on the same inputs.
//
//   attention_decode   (attention_decode.cu) flash-decoding: one CTA per (token, KV head, KV split)
//                      serving the whole GQA group on tensor cores; steps of few tokens; the
//                      splits merged in a thread-block cluster or through a workspace.
//   attention_per_head (attention.cu) one CTA per (token, query head); any step, D <= 256.
#pragma once
#include "ops.h"

namespace dcuda {
struct QkvPostArgs;  // fused_ops.h
}

namespace dcuda {

// Steps of at most this many tokens go to attention_decode (where it supports the shape), unless
// DISPATCH_CUDA_ATTN_DECODE_MAX_TOKENS says otherwise (attention_decode_max_tokens()). Above it the
// per-head kernel runs, which reads each K/V row once per query head (Hq / Hkv times the decode
// kernel's bytes). 256 (CUDA graphs go to 256) since 2026-11-30: the bound was 64, and decode steps of
// 128 / 256 sequences took 42.7 / 69.6 ms (Qwen3-30B-A3B bf16) against 24.0 / 27.7 ms with the decode
// kernel (decode-batch-check.sh on the H200; docs/cuda-backend.md, session 6).
constexpr int kAttentionDecodeMaxTokens = 256;

// kAttentionDecodeMaxTokens, or DISPATCH_CUDA_ATTN_DECODE_MAX_TOKENS (1..65535) read once per process.
// The kernel has no token bound of its own (one CTA per token and KV head; steps of more than about
// 2 x SMs / Hkv tokens never split their keys).
int attention_decode_max_tokens();

// True when attention_decode takes these arguments: T <= attention_decode_max_tokens(), D a multiple
// of 8 up to 256, Hq / Hkv in 1..16, q, K/V caches and out 16-byte aligned, ldq % 4 == 0.
bool attention_decode_supported(const AttentionArgs& a);

// How the splits of a token's keys are merged. kCluster: one thread-block cluster of up to 8 CTAs
// per (token, KV head), merged through distributed shared memory in the same launch (no
// workspace); taken when the step splits its keys at all (T * Hkv below about half the SMs),
// else the split-K path. kWorkspace: the split-K path (partials in a per-stream workspace, merged
// by the last CTA to arrive). kAuto: kCluster unless DISPATCH_CUDA_ATTN_CLUSTER=0.
enum class DecodeMerge { kAuto, kCluster, kWorkspace };

// Flash-decoding attention (see attention_decode.cu). The split-K path's first use of a head
// shape on a stream allocates that stream's split workspace, so that first call must not be
// inside a graph capture (it fails with a clear error if it is); the cluster path allocates nothing.
void attention_decode(const AttentionArgs& a, cudaStream_t stream, DecodeMerge merge = DecodeMerge::kAuto);

// attention_decode with qkv_post (fused_ops.h) folded in: q is read raw from p.qkv and normed
// (qk_norm 0 or 1), clipped and rotated per CTA, and the CTA whose split holds a token's own key
// writes that key's k and v to the caches at p.slots[t] (as qkv_post writes them, bit for bit) and
// reads it from shared memory. a.q is not read; p.qkv is left as it is. Only for steps where no
// token attends to a key another token of the step writes (one new token per sequence: decode);
// a T > 1 chunk of one sequence needs qkv_post + attention_decode. p and a describe the same step
// (T, heads, D, pos, caches): attention_decode_qkv_supported checks that and qk_norm != 2.
bool attention_decode_qkv_supported(const AttentionArgs& a, const QkvPostArgs& p);
void attention_decode_qkv(const AttentionArgs& a, const QkvPostArgs& p, cudaStream_t stream,
                          DecodeMerge merge = DecodeMerge::kAuto);

// Positions from which a decode step counts as long-context (AttentionArgs::long_context): DISPATCH_CUDA_ATTN_LONG_CONTEXT
// (0: never), read once per process; kAttentionLongContext by default.
constexpr int kAttentionLongContext = 8192;
int attention_long_context();

// Whether a long-context step of T tokens over Hkv KV heads takes the split-K merge (kAuto with
// AttentionArgs::long_context): where the clusters (<= 8 CTAs per token and KV head) would leave half the SMs idle,
// split-K spreads the keys over up to 2 CTAs per SM.
bool attention_decode_long_split_k(int T, int Hkv);

// The cluster size (splits per token and KV head) kCluster launches for this step on this
// device, 0 when it leaves the step to the split-K path (no split needed or shape not supported).
int attention_decode_cluster_size(const AttentionArgs& a, cudaStream_t stream);

// The CTA-per-(token, query head) kernel, correct for every step of D <= 256.
void attention_per_head(const AttentionArgs& a, cudaStream_t stream);

}  // namespace dcuda
