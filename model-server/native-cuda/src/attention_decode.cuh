// Paged attention launchers behind attention() (ops.h), declared apart so the standalone check
// (scripts/attention_check.cu) can run each one on the same inputs.
//
//   attention_decode   (attention_decode.cu) flash-decoding: one CTA per (token, KV head, KV split)
//                      serving the whole GQA group on tensor cores; steps of few tokens.
//   attention_per_head (attention.cu) one CTA per (token, query head); any step, D <= 256.
#pragma once
#include "ops.h"

namespace dcuda {

// Steps of at most this many tokens go to attention_decode (where it supports the shape).
constexpr int kAttentionDecodeMaxTokens = 64;

// True when attention_decode takes these arguments: T <= kAttentionDecodeMaxTokens, D a multiple
// of 8 up to 256, Hq / Hkv in 1..16, q, K/V caches and out 16-byte aligned, ldq % 4 == 0.
bool attention_decode_supported(const AttentionArgs& a);

// Flash-decoding attention (see attention_decode.cu). Its first use of a head shape on a stream
// allocates that stream's split workspace, so that first call must not be inside a graph capture
// (it fails with a clear error if it is).
void attention_decode(const AttentionArgs& a, cudaStream_t stream);

// The CTA-per-(token, query head) kernel, correct for every step of D <= 256.
void attention_per_head(const AttentionArgs& a, cudaStream_t stream);

}  // namespace dcuda
