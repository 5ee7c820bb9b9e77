// Expert parallelism in one process (model_ep.cu): one Model per GPU, one host thread per rank.
//   setDevice(n)                     the device the next createModel/upload/random call uses
//   epEnable(models, {maxTokensLl, maxTokensHt})   collective setup, blocking (load time)
//   epStep(models, meta, T, S, R, params?)         the same step on every rank, each on its own
//     thread (the p2p exchanges need every rank's kernels in flight at once); resolves with rank
//     0's logits or sampled ids, every other rank's in `others`, and whether all were bit-identical.
//   epRelease(models)                frees the exchanges on every rank at once (before free)
// A rank that fails inside a step leaves its peers waiting in an exchange until the p2p wait
// kernel traps (20 s): after such an error the models are unusable.
#include <napi.h>
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

class EpStepWorker : public Napi::AsyncWorker {
 public:
  EpStepWorker(Napi::Env env, std::vector<Handle*> hs, std::vector<int32_t> meta, dcuda::StepShape s,
               std::vector<dcuda::SampleParams> params)
      : Napi::AsyncWorker(env), hs_(std::move(hs)), meta_(std::move(meta)), s_(s), params_(std::move(params)),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      const size_t n = hs_.size();
      // every rank grows its scratch (cudaFree) before any rank enters an exchange
      on_ranks(n, [&](int r) { hs_[r]->model->ep_reserve(s_); });
      std::vector<const float*> logits(n);
      std::vector<const int32_t*> ids(n);
      std::vector<const float*> lps(n);
      on_ranks(n, [&](int r) {
        if (params_.empty()) logits[r] = hs_[r]->model->step(meta_.data(), s_);
        else ids[r] = hs_[r]->model->step_sample(meta_.data(), s_, params_.data(), &lps[r]);
      });
      const size_t V = size_t(hs_[0]->model->config().vocab);
      for (size_t r = 0; r < n; ++r) {
        if (params_.empty()) out_.emplace_back(logits[r], logits[r] + size_t(s_.R) * V);
        else ids_.emplace_back(ids[r], ids[r] + s_.R);
        if (r > 0) agree_ = agree_ && (params_.empty() ? out_[r] == out_[0] : ids_[r] == ids_[0]);
      }
      if (!params_.empty()) lp_.assign(lps[0], lps[0] + s_.R);
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    for (Handle* h : hs_) h->busy = false;
    Napi::Object o = Napi::Object::New(Env());
    o.Set("ranksAgree", agree_);
    // rank 0's output, and every other rank's beside it (split-K GEMMs add with fp32 atomics, so
    // ranks may differ in the last bits; the caller judges the difference)
    auto f32 = [&](const std::vector<float>& v) {
      Napi::Float32Array a = Napi::Float32Array::New(Env(), v.size());
      std::memcpy(a.Data(), v.data(), v.size() * 4);
      return a;
    };
    auto i32 = [&](const std::vector<int32_t>& v) {
      Napi::Int32Array a = Napi::Int32Array::New(Env(), v.size());
      std::memcpy(a.Data(), v.data(), v.size() * 4);
      return a;
    };
    Napi::Array others = Napi::Array::New(Env());
    if (params_.empty()) {
      o.Set("logits", f32(out_[0]));
      for (size_t r = 1; r < out_.size(); ++r) others.Set(uint32_t(r - 1), f32(out_[r]));
    } else {
      o.Set("ids", i32(ids_[0]));
      o.Set("logprobs", f32(lp_));
      for (size_t r = 1; r < ids_.size(); ++r) others.Set(uint32_t(r - 1), i32(ids_[r]));
    }
    o.Set("others", others);
    deferred_.Resolve(o);
  }
  void OnError(const Napi::Error& e) override {
    for (Handle* h : hs_) h->busy = false;
    deferred_.Reject(e.Value());
  }

 private:
  std::vector<Handle*> hs_;
  std::vector<int32_t> meta_;
  dcuda::StepShape s_;
  std::vector<dcuda::SampleParams> params_;
  Napi::Promise::Deferred deferred_;
  std::vector<std::vector<float>> out_;  // per rank: logits [R, V]
  std::vector<std::vector<int32_t>> ids_;  // per rank: sampled ids [R]
  std::vector<float> lp_;                  // rank 0's log-probabilities
  bool agree_ = true;
};

Napi::Value EpStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<Handle*> hs = handles_of(info[0]);
  for (Handle* h : hs) {
    if (h->busy) throw Napi::Error::New(env, "a step is already running on one of the models");
    if (!h->model->ep_enabled()) throw Napi::Error::New(env, "epStep needs models set up by epEnable");
  }
  const Napi::Int32Array meta = info[1].As<Napi::Int32Array>();
  dcuda::StepShape s{info[2].As<Napi::Number>().Int32Value(), info[3].As<Napi::Number>().Int32Value(),
                     info[4].As<Napi::Number>().Int32Value()};
  if (s.T <= 0 || s.S <= 0 || s.S > s.T || s.R > s.T) throw Napi::RangeError::New(env, "bad step shape");
  if (s.T > hs[0]->model->ep_max_tokens_ht())
    throw Napi::RangeError::New(env, "EP step of " + std::to_string(s.T) + " tokens exceeds maxTokensHt " +
                                         std::to_string(hs[0]->model->ep_max_tokens_ht()));
  for (Handle* h : hs) {
    const size_t want = size_t(4) * s.T + s.R + size_t(s.S) * h->model->table_stride();
    if (meta.ElementLength() != want)
      throw Napi::RangeError::New(env, "step metadata has " + std::to_string(meta.ElementLength()) + " values, expected " + std::to_string(want));
  }
  std::vector<dcuda::SampleParams> params = sample_params_of(info, 5, s.R);  // sampled step
  auto* w = new EpStepWorker(env, hs, std::vector<int32_t>(meta.Data(), meta.Data() + meta.ElementLength()), s,
                             std::move(params));
  for (Handle* h : hs) h->busy = true;
  Napi::Promise p = w->promise();
  w->Queue();
  return p;
}

}  // namespace

void register_ep(Napi::Env env, Napi::Object exports) {
  exports.Set("setDevice", Napi::Function::New(env, SetDevice));
  exports.Set("epEnable", Napi::Function::New(env, EpEnable));
  exports.Set("epStep", Napi::Function::New(env, EpStep));
  exports.Set("epRelease", Napi::Function::New(env, EpRelease));
}

}  // namespace dcuda_binding
