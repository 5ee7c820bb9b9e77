// Token sampling on the GPU (see sampling.cu). Legend: R rows, V vocabulary.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace dcuda {

constexpr int kMaxBanned = 8;
// Most top log-probabilities a row may ask for (OpenAI's top_logprobs bound).
constexpr int kMaxTopLogprobs = 20;

struct SampleParams {
  float temperature;  // <= 0: greedy
  int32_t top_k;      // <= 0 or >= V: no limit; 1: greedy
  float top_p;        // <= 0 or >= 1: no limit
  int32_t num_banned;
  uint64_t seed;
  uint64_t step;                // the sequence's output index: one draw per (seed, step)
  int32_t banned[kMaxBanned];   // ids that may not be drawn now (EOS before min_tokens)
  // OpenAI's penalties: logit[t] -= frequency_penalty * count[t] + presence_penalty * (count[t] > 0), over the
  // tokens generated so far, before the ban, the temperature and the draw (the reported log-probabilities stay raw).
  float frequency_penalty;
  float presence_penalty;
  int32_t pen_offset;  // the row's (token, count) pairs: SampleExtras::penalties[pen_offset, pen_offset + pen_count)
  int32_t pen_count;
  int32_t pen_input;   // -1, or a token index of the step whose id (read on the device: a chained token) counts once more
  int32_t top_n;       // 0..kMaxTopLogprobs: the raw distribution's best ids and log-probabilities to report
};

// What rows with penalties or top log-probabilities need besides the logits (device pointers; null where no row
// uses them). any: some row has pen_count > 0, pen_input >= 0 or top_n > 0 (the host knows it from the params).
struct SampleExtras {
  bool any = false;
  const int2* penalties = nullptr;    // (token, count) pairs
  const int32_t* token_ids = nullptr;  // the step's token ids (pen_input indexes them)
  int32_t* top_ids = nullptr;          // [R, kMaxTopLogprobs]: row r's best top_n ids, best first (ties: lower id)
  float* top_logprobs = nullptr;       // [R, kMaxTopLogprobs]: their raw log-probabilities
};

// out[r] = a token drawn from logits row r [R, V] fp32 under params[r]; logprob[r] = its
// log-probability under the raw (untempered, unmasked, unpenalized) distribution. Device pointers.
// Penalties and top log-probabilities (extras.any) need the cluster sampler: sample() throws where it does not
// run (sample_extras_supported).
void sample(const float* logits, int R, int V, const SampleParams* params, int32_t* out, float* logprob,
            cudaStream_t stream, const SampleExtras& extras = SampleExtras{});

// Whether sample() takes penalties and top log-probabilities at this vocabulary (the cluster sampler runs).
bool sample_extras_supported(int V);

}  // namespace dcuda
