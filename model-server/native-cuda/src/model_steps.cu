// Steps in flight: turns, the two pinned slots, and token ids chained from the previous step on the device
// (model.h, "Steps in flight"; docs/cuda-backend.md, "Overlapped decode steps").
//
// A turn is a place in the stream's order, taken on the JS thread when the step is called. run_turn (on a worker)
// waits until every earlier turn is enqueued and its slot (turn % 2) is free, enqueues its step with that slot as
// pinned staging, records the slot's event and lets the next turn in; only then it waits, and only for its own
// event, so a step enqueued behind it starts on the GPU the moment this one ends. A slot is reused two turns later,
// after the binding has copied its outputs and released it.
#include <algorithm>
#include <cstring>
#include <string>
#include "check.h"
#include "model.h"

namespace dcuda {
namespace {

// Token i of the step being enqueued takes the id sampled for row chain[i] of the previous sampled step (still in
// `sampled`); a row the sampler found no finite logit for (id -1) feeds token 0: the engine ends that sequence and
// drops this step's token for it.
__global__ void chain_tokens_kernel(int32_t* ids, const int32_t* chain, int n, const int32_t* sampled, int vocab) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || chain[i] < 0) return;
  const int t = sampled[chain[i]];
  ids[i] = t >= 0 && t < vocab ? t : 0;
}

}  // namespace

void Model::use_slot(int slot) {
  cur_slot_ = slot;
  host_meta_ = slots_[slot].meta;
  host_params_ = slots_[slot].params;
  host_sampled_ = slots_[slot].sampled;
  host_logprob_ = slots_[slot].logprob;
  host_tiles_ = slots_[slot].tiles;
}

bool Model::fits(StepShape s) const {
  const size_t meta = size_t(4) * s.T + s.R + size_t(s.S) * table_stride_;
  return s.T <= cap_.T && s.R <= cap_.R && s.S <= cap_.S && meta <= meta_cap_;
}

void Model::chain_tokens(const int32_t* chain, int T) {
  int32_t* staged = slots_[cur_slot_].chain;
  std::memcpy(staged, chain, size_t(T) * 4);
  DC_CUDA(cudaMemcpyAsync(chain_, staged, size_t(T) * 4, cudaMemcpyHostToDevice, stream_));
  chain_tokens_kernel<<<(T + 127) / 128, 128, 0, stream_>>>(meta_, chain_, T, sampled_, cfg_.vocab);
  DC_CUDA(cudaGetLastError());
}

uint64_t Model::take_turn() {
  std::lock_guard<std::mutex> lock(turn_mu_);
  return turns_taken_++;
}

void Model::release_turn(int slot) {
  std::lock_guard<std::mutex> lock(turn_mu_);
  slot_busy_[slot & 1] = false;
  turn_cv_.notify_all();
}

// Penalty pairs go up with the step's params: the device buffer (one, read in stream order like params_) and the
// slot's pinned staging grow on demand; growing the device buffer waits for the stream (the step before may still
// read it), which happens only when a step carries more pairs than any before it.
void Model::stage_penalties(const SampleParams* params, StepShape s, const int32_t* pairs, int n_pen) {
  for (int r = 0; r < s.R; ++r) {
    const SampleParams& p = params[r];
    DC_CHECK(p.pen_count >= 0 && p.pen_offset >= 0 && size_t(p.pen_offset) + size_t(p.pen_count) <= size_t(n_pen),
             "row " + std::to_string(r) + "'s penalty pairs [" + std::to_string(p.pen_offset) + ", +" +
                 std::to_string(p.pen_count) + ") are outside the step's " + std::to_string(n_pen) + " pairs");
    DC_CHECK(p.pen_input >= -1 && p.pen_input < s.T,
             "row " + std::to_string(r) + "'s penalized input token " + std::to_string(p.pen_input) +
                 " is outside the step's " + std::to_string(s.T) + " tokens");
    DC_CHECK(p.top_n >= 0 && p.top_n <= kMaxTopLogprobs, "top log-probabilities per row: 0 to " + std::to_string(kMaxTopLogprobs));
  }
  if (n_pen == 0) return;
  const size_t want = size_t(n_pen);
  const size_t cap = std::max<size_t>(want + want / 2, 4096);
  if (want > pen_cap_) {
    DC_CUDA(cudaStreamSynchronize(stream_));
    if (pen_) DC_CUDA(cudaFree(pen_));
    pen_ = nullptr, pen_cap_ = 0;
    DC_CUDA(cudaMalloc(&pen_, cap * sizeof(int2)));
    pen_cap_ = cap;
  }
  PinnedSlot& slot = slots_[cur_slot_];
  if (want > slot.pen_cap) {  // this slot's last step has been copied out (its turn was released)
    if (slot.pen) DC_CUDA(cudaFreeHost(slot.pen));
    slot.pen = nullptr, slot.pen_cap = 0;
    DC_CUDA(cudaMallocHost(&slot.pen, cap * sizeof(int2)));
    slot.pen_cap = cap;
  }
  std::memcpy(slot.pen, pairs, want * sizeof(int2));
  DC_CUDA(cudaMemcpyAsync(pen_, slot.pen, want * sizeof(int2), cudaMemcpyHostToDevice, stream_));
}

Model::StepOut Model::run_turn(uint64_t turn, const int32_t* meta, StepShape s, const SampleParams* params,
                               const int32_t* host_rows, int n_host, const int32_t* chain, const int32_t* penalties,
                               int n_pen) {
  const int slot = int(turn & 1);
  StepOut out;
  out.slot = slot;
  std::unique_lock<std::mutex> lock(turn_mu_);
  turn_cv_.wait(lock, [&] { return turns_enqueued_ == turn && !slot_busy_[slot]; });
  slot_busy_[slot] = true;
  try {
    DC_CHECK(s.T > 0 && s.S > 0 && s.S <= s.T && s.R <= s.T, "bad step shape");
    DC_CHECK(n_host >= 0 && n_host <= s.R, "more host-sampled rows than logits rows");
    DC_CHECK(params || n_host == 0, "host rows are for sampled steps");
    DC_CHECK(n_pen >= 0 && (n_pen == 0 || (params && penalties)), "penalty pairs are for sampled steps");
    for (int i = 0; i < n_host; ++i)
      DC_CHECK(host_rows[i] >= 0 && host_rows[i] < s.R, "host-sampled row outside the step's logits rows");
    bool decode = false;
    const StepShape run = run_shape(meta, s, &decode);
    if (chain) {
      DC_CHECK(fits(run), "a chained step may not grow the step buffers (the previous step's ids would be lost)");
      for (int i = 0; i < s.T; ++i)
        DC_CHECK(chain[i] >= -1 && chain[i] < last_sampled_rows_,
                 "chained token " + std::to_string(i) + " names row " + std::to_string(chain[i]) +
                     " of the previous sampled step, which has " + std::to_string(last_sampled_rows_) + " rows");
    }
    // Growing frees every slot's pinned buffers: the other slot's outputs must have been copied out first.
    if (!fits(run)) turn_cv_.wait(lock, [&] { return !slot_busy_[slot ^ 1]; });
    lock.unlock();
    DC_CUDA(cudaSetDevice(device_));
    if (!step_done_[slot]) DC_CUDA(cudaEventCreateWithFlags(&step_done_[slot], cudaEventDisableTiming));
    ensure_capacity(run);  // before use_slot: growing reallocates the slots
    use_slot(slot);
    enqueue(meta, s, chain);
    const size_t V = size_t(cfg_.vocab);
    if (!params) {
      DC_CUDA(cudaMemcpyAsync(host_logits_, logits_, size_t(s.R) * V * 4, cudaMemcpyDeviceToHost, stream_));
      out.logits = host_logits_;
    } else {
      // rows the host samples: their logits come back (one copy per row; the rest stay on the GPU)
      for (int i = 0; i < n_host; ++i)
        DC_CUDA(cudaMemcpyAsync(host_logits_ + size_t(i) * V, logits_ + size_t(host_rows[i]) * V, V * 4,
                                cudaMemcpyDeviceToHost, stream_));
      out.host_logits = n_host > 0 ? host_logits_ : nullptr;
      stage_penalties(params, s, penalties, n_pen);
      std::memcpy(host_params_, params, size_t(s.R) * sizeof(SampleParams));
      DC_CUDA(cudaMemcpyAsync(params_, host_params_, size_t(s.R) * sizeof(SampleParams), cudaMemcpyHostToDevice,
                              stream_));
      bool any_top = false, any_extra = false;
      for (int r = 0; r < s.R; ++r) {
        any_top |= params[r].top_n > 0;
        any_extra |= params[r].top_n > 0 || params[r].pen_count > 0 || params[r].pen_input >= 0;
      }
      SampleExtras ex;
      ex.any = any_extra;
      ex.penalties = pen_;
      ex.token_ids = meta_;  // ids [0, T) in both meta layouts (chained ones written there by chain_tokens)
      ex.top_ids = top_ids_;
      ex.top_logprobs = top_logprobs_;
      sample(logits_, s.R, cfg_.vocab, params_, sampled_, sampled_logprob_, stream_, ex);
      DC_CUDA(cudaMemcpyAsync(host_sampled_, sampled_, size_t(s.R) * 4, cudaMemcpyDeviceToHost, stream_));
      DC_CUDA(cudaMemcpyAsync(host_logprob_, sampled_logprob_, size_t(s.R) * 4, cudaMemcpyDeviceToHost, stream_));
      out.ids = host_sampled_;
      out.logprobs = host_logprob_;
      if (any_top) {
        PinnedSlot& ps = slots_[slot];
        const size_t n = size_t(s.R) * kMaxTopLogprobs;
        DC_CUDA(cudaMemcpyAsync(ps.top_ids, top_ids_, n * 4, cudaMemcpyDeviceToHost, stream_));
        DC_CUDA(cudaMemcpyAsync(ps.top_logprobs, top_logprobs_, n * 4, cudaMemcpyDeviceToHost, stream_));
        out.top_ids = ps.top_ids;
        out.top_logprobs = ps.top_logprobs;
      }
    }
    DC_CUDA(cudaEventRecord(step_done_[slot], stream_));
    lock.lock();
    if (params) last_sampled_rows_ = s.R;
  } catch (...) {
    if (!lock.owns_lock()) lock.lock();
    slot_busy_[slot] = false;
    ++turns_enqueued_;
    turn_cv_.notify_all();
    throw;
  }
  ++turns_enqueued_;
  turn_cv_.notify_all();
  lock.unlock();
  DC_CUDA(cudaEventSynchronize(step_done_[slot]));
  return out;
}

const float* Model::step(const int32_t* meta, StepShape s) {
  const StepOut o = run_turn(take_turn(), meta, s, nullptr, nullptr, 0, nullptr);
  release_turn(o.slot);
  return o.logits;
}

const int32_t* Model::step_sample(const int32_t* meta, StepShape s, const SampleParams* params, const float** logprobs) {
  return step_sample(meta, s, params, logprobs, nullptr, 0, nullptr);
}

const int32_t* Model::step_sample(const int32_t* meta, StepShape s, const SampleParams* params, const float** logprobs,
                                  const int32_t* host_rows, int n_host, const float** host_logits) {
  const StepOut o = run_turn(take_turn(), meta, s, params, host_rows, n_host, nullptr);
  release_turn(o.slot);
  *logprobs = o.logprobs;
  if (host_logits) *host_logits = o.host_logits;
  return o.ids;
}

}  // namespace dcuda
