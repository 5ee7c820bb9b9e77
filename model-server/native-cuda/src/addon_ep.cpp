// Expert parallelism in one process (model_ep.cu): one Model per GPU, one host thread per rank.
//   setDevice(n)                     the device the next createModel/upload/random call uses
//   epEnable(models, {maxTokensLl, maxTokensHt})   collective setup, blocking (load time)
//   epStep(models, meta, T, S, R, params?)         the same step on every rank, each on its own
//     thread (the p2p exchanges need every rank's kernels in flight at once); resolves with rank
//     0's logits or sampled ids, every other rank's in `others`, and whether all were bit-identical.
//   epStepRanks(models, [{meta, T, S, R, params?}])  each rank its own sequences (data-parallel
//     attention, each rank's own KV); a rank with T = 0 only serves its experts; resolves with
//     {ranks: [{logits} | {ids, logprobs, hostLogits?}]} (hostRows: rows whose logits come back too). The mode (low-latency when every rank has at most
//     maxTokensLl tokens) is the same on every rank.
//   epRelease(models)                frees the exchanges on every rank at once (before free)
// A rank that fails inside a step leaves its peers waiting in an exchange until the p2p wait
// kernel traps (20 s): after such an error the models are unusable.
#include <napi.h>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "binding.h"
#include "ep.h"

namespace dcuda_binding {
namespace {

std::vector<Handle*> handles_of(const Napi::Value& v) {
  if (!v.IsArray()) throw Napi::TypeError::New(v.Env(), "expected an array of model handles");
  const Napi::Array a = v.As<Napi::Array>();
  std::vector<Handle*> hs;
  for (uint32_t i = 0; i < a.Length(); ++i) hs.push_back(&handle_of(a.Get(i)));
  if (hs.empty()) throw Napi::RangeError::New(v.Env(), "no models");
  return hs;
}

// Runs f(rank) on one thread per rank and joins; the first error (by rank) is rethrown.
template <typename F>
void on_ranks(size_t n, F&& f) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> th;
  for (size_t r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      try {
        f(int(r));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : th) t.join();
  for (size_t r = 0; r < n; ++r)
    if (!errors[r].empty()) throw std::runtime_error("rank " + std::to_string(r) + ": " + errors[r]);
}

Napi::Value SetDevice(const Napi::CallbackInfo& info) {
  require_device(info.Env());
  const int d = info[0].As<Napi::Number>().Int32Value();
  int n = 0;
  cudaGetDeviceCount(&n);
  if (d < 0 || d >= n) throw Napi::RangeError::New(info.Env(), "device " + std::to_string(d) + " outside [0, " + std::to_string(n) + ")");
  guarded(info.Env(), [&] { DC_CUDA(cudaSetDevice(d)); return 0; });
  return info.Env().Undefined();
}

Napi::Value EpEnable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<Handle*> hs = handles_of(info[0]);
  const Napi::Object o = info[1].IsObject() ? info[1].As<Napi::Object>() : Napi::Object::New(env);
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i]->busy) throw Napi::Error::New(env, "epEnable during a step");
    for (size_t j = 0; j < i; ++j)
      if (hs[i]->model->device() == hs[j]->model->device())
        throw Napi::RangeError::New(env, "EP ranks " + std::to_string(j) + " and " + std::to_string(i) + " are on the same GPU");
  }
  dcuda::EpOptions base;
  base.num_ranks = int(hs.size());
  base.max_tokens_ll = int_of(o, "maxTokensLl", 128);
  base.max_tokens_ht = int_of(o, "maxTokensHt", 4096);
  return guarded(env, [&] {
    const std::vector<uint8_t> id = dispatch::ep::ncclUniqueIdBytes();
    on_ranks(hs.size(), [&](int r) {
      dcuda::EpOptions opt = base;
      opt.rank = r;
      opt.nccl_id = id.data();
      DC_CUDA(cudaSetDevice(hs[r]->model->device()));
      hs[r]->model->enable_ep(opt);
    });
    return env.Undefined();
  });
}

Napi::Value EpRelease(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<Handle*> hs = handles_of(info[0]);
  for (Handle* h : hs)
    if (h->busy) throw Napi::Error::New(env, "epRelease during a step");
  return guarded(env, [&] {
    on_ranks(hs.size(), [&](int r) { hs[r]->model->release_ep(); });
    return env.Undefined();
  });
}

// One rank's share of a collective step; T == 0: the rank only serves its experts (ep_idle_step).
struct RankStep {
  std::vector<int32_t> meta;
  dcuda::StepShape s{};
  std::vector<dcuda::SampleParams> params;  // sampled steps: one per logits row
  std::vector<int32_t> host_rows;            // sampled steps: rows whose logits go to the host
};

// Runs a collective step, one host thread per rank. Replicated (epStep): every rank the same
// tokens, resolving with rank 0's output, the others' beside it and whether all were identical.
// Per rank (epStepRanks): resolves with every rank's own output.
class EpStepWorker : public Napi::AsyncWorker {
 public:
  EpStepWorker(Napi::Env env, std::vector<Handle*> hs, std::vector<RankStep> steps, bool sampled, bool replicated)
      : Napi::AsyncWorker(env), hs_(std::move(hs)), steps_(std::move(steps)), sampled_(sampled), replicated_(replicated),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      const size_t n = hs_.size();
      int most = 0;
      for (const RankStep& st : steps_) most = std::max(most, st.s.T);
      const bool ll = most <= hs_[0]->model->ep_max_tokens_ll();
      // every rank grows its scratch (cudaFree) before any rank enters an exchange
      on_ranks(n, [&](int r) {
        const RankStep& st = steps_[r];
        hs_[r]->model->ep_reserve(st.s.T > 0 ? st.s : dcuda::StepShape{1, 1, 1});
        hs_[r]->model->ep_begin_step(ll, most);
      });
      logits_.resize(n), ids_.resize(n), lp_.resize(n), host_.resize(n);
      const size_t V = size_t(hs_[0]->model->config().vocab);
      on_ranks(n, [&](int r) {
        const RankStep& st = steps_[r];
        dcuda::Model& m = *hs_[r]->model;
        if (st.s.T == 0) {
          m.ep_idle_step();
        } else if (!sampled_) {
          const float* lg = m.step(st.meta.data(), st.s);
          logits_[r].assign(lg, lg + size_t(st.s.R) * V);
        } else {
          const float* lp = nullptr;
          const float* hl = nullptr;
          const int32_t* ids = m.step_sample(st.meta.data(), st.s, st.params.data(), &lp, st.host_rows.data(),
                                             int(st.host_rows.size()), &hl);
          ids_[r].assign(ids, ids + st.s.R);
          lp_[r].assign(lp, lp + st.s.R);
          if (!st.host_rows.empty()) host_[r].assign(hl, hl + st.host_rows.size() * V);
        }
      });
      for (size_t r = 1; replicated_ && r < n; ++r)
        agree_ = agree_ && (sampled_ ? ids_[r] == ids_[0] : logits_[r] == logits_[0]);
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    for (Handle* h : hs_) h->busy = false;
    auto f32 = [&](const std::vector<float>& v) {
      Napi::Float32Array a = Napi::Float32Array::New(Env(), v.size());
      if (!v.empty()) std::memcpy(a.Data(), v.data(), v.size() * 4);
      return a;
    };
    auto i32 = [&](const std::vector<int32_t>& v) {
      Napi::Int32Array a = Napi::Int32Array::New(Env(), v.size());
      if (!v.empty()) std::memcpy(a.Data(), v.data(), v.size() * 4);
      return a;
    };
    Napi::Object o = Napi::Object::New(Env());
    if (replicated_) {
      // rank 0's output, and every other rank's beside it (the caller judges any difference)
      o.Set("ranksAgree", agree_);
      Napi::Array others = Napi::Array::New(Env());
      if (!sampled_) {
        o.Set("logits", f32(logits_[0]));
        for (size_t r = 1; r < logits_.size(); ++r) others.Set(uint32_t(r - 1), f32(logits_[r]));
      } else {
        o.Set("ids", i32(ids_[0]));
        o.Set("logprobs", f32(lp_[0]));
        for (size_t r = 1; r < ids_.size(); ++r) others.Set(uint32_t(r - 1), i32(ids_[r]));
      }
      o.Set("others", others);
    } else {
      Napi::Array ranks = Napi::Array::New(Env());
      for (size_t r = 0; r < hs_.size(); ++r) {
        Napi::Object ro = Napi::Object::New(Env());
        if (!sampled_) {
          ro.Set("logits", f32(logits_[r]));
        } else {
          ro.Set("ids", i32(ids_[r]));
          ro.Set("logprobs", f32(lp_[r]));
          if (!steps_[r].host_rows.empty()) ro.Set("hostLogits", f32(host_[r]));
        }
        ranks.Set(uint32_t(r), ro);
      }
      o.Set("ranks", ranks);
    }
    deferred_.Resolve(o);
  }
  void OnError(const Napi::Error& e) override {
    for (Handle* h : hs_) h->busy = false;
    deferred_.Reject(e.Value());
  }

 private:
  std::vector<Handle*> hs_;
  std::vector<RankStep> steps_;
  bool sampled_, replicated_;
  Napi::Promise::Deferred deferred_;
  std::vector<std::vector<float>> logits_;  // per rank: [R, V]
  std::vector<std::vector<int32_t>> ids_;   // per rank: sampled ids [R]
  std::vector<std::vector<float>> lp_;      // per rank: their raw log-probabilities [R]
  std::vector<std::vector<float>> host_;    // per rank: logits of its host rows [n_host, V]
  bool agree_ = true;
};

// Checks a rank's step shape and metadata length against its model; T == 0 (idle) takes no metadata.
void check_rank_step(Napi::Env env, const Handle& h, const RankStep& st, size_t r) {
  const std::string who = "rank " + std::to_string(r) + ": ";
  const dcuda::StepShape& s = st.s;
  if (s.T == 0) {
    if (s.S != 0 || s.R != 0 || !st.meta.empty()) throw Napi::RangeError::New(env, who + "a step of 0 tokens takes no sequences");
    return;
  }
  if (s.T < 0 || s.S <= 0 || s.S > s.T || s.R > s.T) throw Napi::RangeError::New(env, who + "bad step shape");
  if (s.T > h.model->ep_max_tokens_ht())
    throw Napi::RangeError::New(env, who + "EP step of " + std::to_string(s.T) + " tokens exceeds maxTokensHt " +
                                         std::to_string(h.model->ep_max_tokens_ht()));
  const size_t want = size_t(4) * s.T + s.R + size_t(s.S) * h.model->table_stride();
  if (st.meta.size() != want)
    throw Napi::RangeError::New(env, who + "step metadata has " + std::to_string(st.meta.size()) + " values, expected " +
                                         std::to_string(want));
}

std::vector<Handle*> ep_handles(const Napi::Value& v) {
  std::vector<Handle*> hs = handles_of(v);
  for (Handle* h : hs) {
    if (h->busy) throw Napi::Error::New(v.Env(), "a step is already running on one of the models");
    if (!h->model->ep_enabled()) throw Napi::Error::New(v.Env(), "EP steps need models set up by epEnable");
  }
  return hs;
}

Napi::Value queue_step(Napi::Env env, std::vector<Handle*> hs, std::vector<RankStep> steps, bool sampled, bool replicated) {
  int most = 0;
  for (size_t r = 0; r < steps.size(); ++r) {
    check_rank_step(env, *hs[r], steps[r], r);
    most = std::max(most, steps[r].s.T);
  }
  if (most == 0) throw Napi::RangeError::New(env, "an EP step needs tokens on at least one rank");
  auto* w = new EpStepWorker(env, hs, std::move(steps), sampled, replicated);
  for (Handle* h : hs) h->busy = true;
  Napi::Promise p = w->promise();
  w->Queue();
  return p;
}

// epStep(models, meta, T, S, R, params?): every rank the same step (replicated attention).
Napi::Value EpStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<Handle*> hs = ep_handles(info[0]);
  const Napi::Int32Array meta = info[1].As<Napi::Int32Array>();
  RankStep st;
  st.meta.assign(meta.Data(), meta.Data() + meta.ElementLength());
  st.s = {info[2].As<Napi::Number>().Int32Value(), info[3].As<Napi::Number>().Int32Value(),
          info[4].As<Napi::Number>().Int32Value()};
  if (st.s.T <= 0) throw Napi::RangeError::New(env, "bad step shape");
  st.params = sample_params_of(info, 5, st.s.R);  // sampled step
  const bool sampled = info.Length() > 5 && !info[5].IsUndefined();
  return queue_step(env, hs, std::vector<RankStep>(hs.size(), st), sampled, true);
}

// epStepRanks(models, [{meta, T, S, R, params?}] one per rank): each rank its own sequences
// (data-parallel attention); a rank with T = 0 only serves its experts. Either every rank with
// tokens gives params (sampled step) or none does.
Napi::Value EpStepRanks(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<Handle*> hs = ep_handles(info[0]);
  if (!info[1].IsArray()) throw Napi::TypeError::New(env, "expected an array of rank steps");
  const Napi::Array a = info[1].As<Napi::Array>();
  if (a.Length() != hs.size())
    throw Napi::RangeError::New(env, std::to_string(a.Length()) + " rank steps for " + std::to_string(hs.size()) + " ranks");
  std::vector<RankStep> steps(hs.size());
  int with_params = 0, with_tokens = 0;
  for (uint32_t r = 0; r < a.Length(); ++r) {
    if (!a.Get(r).IsObject()) throw Napi::TypeError::New(env, "rank step " + std::to_string(r) + " is not an object");
    const Napi::Object o = a.Get(r).As<Napi::Object>();
    RankStep& st = steps[r];
    st.s = {int_of(o, "T", -1), int_of(o, "S", -1), int_of(o, "R", -1)};
    const Napi::Value m = o.Get("meta");
    if (!m.IsTypedArray() || m.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
      throw Napi::TypeError::New(env, "rank step " + std::to_string(r) + ": meta must be an Int32Array");
    const Napi::Int32Array meta = m.As<Napi::Int32Array>();
    st.meta.assign(meta.Data(), meta.Data() + meta.ElementLength());
    if (st.s.T > 0) {
      ++with_tokens;
      st.params = sample_params_from(o.Get("params"), st.s.R);
      if (!o.Get("params").IsUndefined()) ++with_params;
      st.host_rows = host_rows_of(o.Get("hostRows"), st.s.R);
      if (st.params.empty() && !st.host_rows.empty())
        throw Napi::Error::New(env, "rank step " + std::to_string(r) + ": host rows are for sampled steps");
    }
  }
  if (with_params != 0 && with_params != with_tokens)
    throw Napi::Error::New(env, "either every rank with tokens gives sampling params or none does");
  return queue_step(env, hs, std::move(steps), with_params > 0, false);
}

}  // namespace

void register_ep(Napi::Env env, Napi::Object exports) {
  exports.Set("setDevice", Napi::Function::New(env, SetDevice));
  exports.Set("epEnable", Napi::Function::New(env, EpEnable));
  exports.Set("epStep", Napi::Function::New(env, EpStep));
  exports.Set("epStepRanks", Napi::Function::New(env, EpStepRanks));
  exports.Set("epRelease", Napi::Function::New(env, EpRelease));
}

}  // namespace dcuda_binding
