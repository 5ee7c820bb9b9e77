// node-addon-api binding of the CUDA backend (model-server/src/backend/cuda/native.ts is the one
// file that loads it). No kernel logic here: argument checks, handle lifetime, and running the
// blocking step off the event loop. CudaError / KernelError become JS errors here and only here.
// CUDA runtime is linked statically, so this loads on a machine without a GPU and the first
// call reports "no CUDA device" as an ordinary, catchable error.
#include <napi.h>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include "check.h"
#include "model.h"
#include "binding.h"

namespace dcuda_binding {
namespace {

Napi::Value DeviceInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  require_device(env);
  return guarded(env, [&] {
    int dev = 0;
    DC_CUDA(cudaGetDevice(&dev));
    cudaDeviceProp p{};
    DC_CUDA(cudaGetDeviceProperties(&p, dev));
    size_t free_b = 0, total_b = 0;
    DC_CUDA(cudaMemGetInfo(&free_b, &total_b));
    int count = 0;
    DC_CUDA(cudaGetDeviceCount(&count));
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", p.name);
    o.Set("count", count);
    o.Set("computeCapability", std::to_string(p.major) + "." + std::to_string(p.minor));
    o.Set("freeBytes", double(free_b));
    o.Set("totalBytes", double(total_b));
    return o;
  });
}

Napi::Value CreateModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  require_device(env);
  if (!info[0].IsObject()) throw Napi::TypeError::New(env, "createModel(config)");
  const Napi::Object c = info[0].As<Napi::Object>();
  dcuda::ModelConfig cfg;
  cfg.num_layers = int_of(c, "numLayers");
  cfg.hidden = int_of(c, "hidden");
  cfg.num_heads = int_of(c, "numHeads");
  cfg.num_kv_heads = int_of(c, "numKvHeads");
  cfg.head_dim = int_of(c, "headDim");
  cfg.vocab = int_of(c, "vocabSize");
  cfg.rms_eps = float_of(c, "rmsEps", 1e-6f);
  cfg.qk_norm = int_of(c, "qkNorm");
  cfg.clip_qkv = float_of(c, "clipQkv");
  cfg.window = int_of(c, "window");
  cfg.max_context = int_of(c, "maxContext");
  cfg.int8_experts = bool_of(c, "int8Experts");
  if (c.Get("moeBlock").IsBoolean()) cfg.moe_block = bool_of(c, "moeBlock") ? 1 : 0;
  if (c.Get("selfRoute").IsBoolean()) cfg.self_route = bool_of(c, "selfRoute") ? 1 : 0;
  const Napi::Float32Array inv = c.Get("invFreq").As<Napi::Float32Array>();
  cfg.inv_freq.assign(inv.Data(), inv.Data() + inv.ElementLength());
  const Napi::Array layers = c.Get("layers").As<Napi::Array>();
  for (uint32_t i = 0; i < layers.Length(); ++i) {
    const Napi::Object l = layers.Get(i).As<Napi::Object>();
    dcuda::LayerConfig lc;
    lc.moe = bool_of(l, "moe");
    lc.dense_intermediate = int_of(l, "denseIntermediate");
    lc.num_experts = int_of(l, "numExperts");
    lc.top_k = int_of(l, "topK");
    lc.intermediate = int_of(l, "intermediate");
    lc.norm_top_k = bool_of(l, "normTopK");
    lc.shared_intermediate = int_of(l, "sharedIntermediate");
    lc.shared_gate = bool_of(l, "sharedGate");
    cfg.layers.push_back(lc);
  }
  return guarded(env, [&]() -> Napi::Value {
    auto* h = new Handle{std::make_unique<dcuda::Model>(std::move(cfg))};
    return Napi::External<Handle>::New(env, h, [](Napi::Env, Handle* p) { delete p; });
  });
}

Napi::Value Upload(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  const Napi::Float32Array a = info[1].As<Napi::Float32Array>();
  const bool bf16 = info[2].ToBoolean().Value();
  return guarded(info.Env(), [&] { return Napi::Number::New(info.Env(), h.model->upload(a.Data(), a.ElementLength(), bf16)); });
}

// uploadRanges(model, files: string[], ranges: Float64Array [file, begin, end, dtype]*, n, asBf16)
// dtype: 0 F32, 1 F16, 2 BF16. Blocking file reads: load time only.
Napi::Value UploadRanges(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  const Napi::Array files_js = info[1].As<Napi::Array>();
  const Napi::Float64Array r = info[2].As<Napi::Float64Array>();
  const double n = info[3].As<Napi::Number>().DoubleValue();
  const bool bf16 = info[4].ToBoolean().Value();
  std::vector<std::string> files;
  for (uint32_t i = 0; i < files_js.Length(); ++i) files.push_back(files_js.Get(i).As<Napi::String>().Utf8Value());
  if (r.ElementLength() % 4 != 0) throw Napi::RangeError::New(info.Env(), "ranges come in fours: file, begin, end, dtype");
  std::vector<dcuda::FileRange> ranges;
  for (size_t i = 0; i < r.ElementLength(); i += 4) {
    const int dt = int(r[i + 3]);
    if (dt < 0 || dt > 2) throw Napi::RangeError::New(info.Env(), "dtype must be 0 (F32), 1 (F16) or 2 (BF16)");
    ranges.push_back({int(r[i]), int64_t(r[i + 1]), int64_t(r[i + 2]), static_cast<dcuda::FileDType>(dt)});
  }
  return guarded(info.Env(), [&] { return Napi::Number::New(info.Env(), h.model->upload_ranges(files, ranges, size_t(n), bf16)); });
}

Napi::Value Random(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  const double n = info[1].As<Napi::Number>().DoubleValue();
  const float scale = info[2].As<Napi::Number>().FloatValue();
  const int64_t seed = info[3].As<Napi::Number>().Int64Value();
  const bool bf16 = info[4].ToBoolean().Value();
  return guarded(info.Env(), [&] { return Napi::Number::New(info.Env(), h.model->random(size_t(n), scale, uint64_t(seed), bf16)); });
}

Napi::Value Fill(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  const double n = info[1].As<Napi::Number>().DoubleValue();
  const float value = info[2].As<Napi::Number>().FloatValue();
  const bool bf16 = info[3].ToBoolean().Value();
  return guarded(info.Env(), [&] { return Napi::Number::New(info.Env(), h.model->fill(size_t(n), value, bf16)); });
}

Napi::Value Bind(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  const Napi::Object o = info[1].As<Napi::Object>();
  dcuda::ModelWeights w;
  w.embed = int_of(o, "embed", -1);
  w.norm = int_of(o, "norm", -1);
  w.lm_head = int_of(o, "lmHead", -1);
  const Napi::Array layers = o.Get("layers").As<Napi::Array>();
  for (uint32_t i = 0; i < layers.Length(); ++i) {
    const Napi::Object l = layers.Get(i).As<Napi::Object>();
    dcuda::LayerWeights lw;
    lw.input_norm = int_of(l, "inputNorm", -1);
    lw.post_norm = int_of(l, "postNorm", -1);
    lw.qkv = int_of(l, "qkv", -1);
    lw.qkv_bias = int_of(l, "qkvBias", -1);
    lw.o = int_of(l, "o", -1);
    lw.o_bias = int_of(l, "oBias", -1);
    lw.q_norm = int_of(l, "qNorm", -1);
    lw.k_norm = int_of(l, "kNorm", -1);
    lw.gate_up = int_of(l, "gateUp", -1);
    lw.down = int_of(l, "down", -1);
    lw.router = int_of(l, "router", -1);
    lw.router_bias = int_of(l, "routerBias", -1);
    lw.shared_gate_up = int_of(l, "sharedGateUp", -1);
    lw.shared_down = int_of(l, "sharedDown", -1);
    lw.shared_gate = int_of(l, "sharedGate", -1);
    w.layers.push_back(lw);
  }
  guarded(info.Env(), [&] { h.model->bind(std::move(w)); return 0; });
  return info.Env().Undefined();
}

Napi::Value AllocateKv(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  if (h.busy) throw Napi::Error::New(info.Env(), "allocateKv during a step");
  const int blocks = info[1].As<Napi::Number>().Int32Value();
  const int bs = info[2].As<Napi::Number>().Int32Value();
  return guarded(info.Env(), [&] {
    h.model->allocate_kv(blocks, bs);
    return Napi::Number::New(info.Env(), h.model->table_stride());
  });
}

Napi::Value KvBytesPerBlock(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  return Napi::Number::New(info.Env(), double(h.model->kv_bytes_per_block(info[1].As<Napi::Number>().Int32Value())));
}

Napi::Value WeightBytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), double(handle_of(info[0]).model->weight_bytes()));
}

Napi::Value SetGraphs(const Napi::CallbackInfo& info) {
  handle_of(info[0]).model->set_graphs(info[1].As<Napi::Number>().Int32Value());
  return info.Env().Undefined();
}

Napi::Value GraphsCaptured(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), handle_of(info[0]).model->graphs_captured());
}

// Runs one step (Model::run_turn) in a worker thread, at the turn taken when it was called; resolves with the logits
// [R, V] as a Float32Array, or (params given) { ids, logprobs, hostLogits? }. The model's slot for the turn is
// released once the outputs are copied into JS arrays.
class StepWorker : public Napi::AsyncWorker {
 public:
  StepWorker(Napi::Env env, Handle& h, uint64_t turn, std::vector<int32_t> meta, dcuda::StepShape shape,
             std::vector<dcuda::SampleParams> params, std::vector<int32_t> host_rows, std::vector<int32_t> chain,
             std::vector<int32_t> penalties, bool downloads_logits)
      : Napi::AsyncWorker(env), h_(h), turn_(turn), meta_(std::move(meta)), shape_(shape), params_(std::move(params)),
        host_rows_(std::move(host_rows)), chain_(std::move(chain)), penalties_(std::move(penalties)),
        downloads_logits_(downloads_logits),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      out_ = h_.model->run_turn(turn_, meta_.data(), shape_, params_.empty() ? nullptr : params_.data(),
                                host_rows_.data(), int(host_rows_.size()), chain_.empty() ? nullptr : chain_.data(),
                                penalties_.empty() ? nullptr : penalties_.data(), int(penalties_.size() / 2));
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    Napi::Value result = params_.empty() ? logits() : sampled();
    done();
    deferred_.Resolve(result);
  }
  void OnError(const Napi::Error& e) override {
    done();
    deferred_.Reject(e.Value());
  }

 private:
  Napi::Value logits() {
    const size_t n = size_t(shape_.R) * h_.model->config().vocab;
    Napi::Float32Array a = Napi::Float32Array::New(Env(), n);
    std::memcpy(a.Data(), out_.logits, n * 4);
    return a;
  }
  Napi::Value sampled() {
    Napi::Int32Array ids = Napi::Int32Array::New(Env(), shape_.R);
    std::memcpy(ids.Data(), out_.ids, size_t(shape_.R) * 4);
    Napi::Float32Array lp = Napi::Float32Array::New(Env(), shape_.R);
    std::memcpy(lp.Data(), out_.logprobs, size_t(shape_.R) * 4);
    Napi::Object o = Napi::Object::New(Env());
    o.Set("ids", ids);
    o.Set("logprobs", lp);
    if (!host_rows_.empty()) {
      const size_t n = host_rows_.size() * h_.model->config().vocab;
      Napi::Float32Array hl = Napi::Float32Array::New(Env(), n);
      std::memcpy(hl.Data(), out_.host_logits, n * 4);
      o.Set("hostLogits", hl);
    }
    if (out_.top_ids) {  // some row asked for top log-probabilities: [R, kMaxTopLogprobs] each
      const size_t n = size_t(shape_.R) * dcuda::kMaxTopLogprobs;
      Napi::Int32Array ti = Napi::Int32Array::New(Env(), n);
      std::memcpy(ti.Data(), out_.top_ids, n * 4);
      Napi::Float32Array tl = Napi::Float32Array::New(Env(), n);
      std::memcpy(tl.Data(), out_.top_logprobs, n * 4);
      o.Set("topIds", ti);
      o.Set("topLogprobs", tl);
    }
    return o;
  }
  void done() {
    h_.model->release_turn(int(turn_ & 1));
    if (downloads_logits_) h_.logits_in_flight = false;
    h_.busy = --h_.steps_in_flight > 0;
  }

  Handle& h_;
  uint64_t turn_;
  std::vector<int32_t> meta_;
  dcuda::StepShape shape_;
  std::vector<dcuda::SampleParams> params_;
  std::vector<int32_t> host_rows_;
  std::vector<int32_t> chain_;
  std::vector<int32_t> penalties_;
  bool downloads_logits_;
  Napi::Promise::Deferred deferred_;
  dcuda::Model::StepOut out_;
};

// Whether the model's sampled steps take penalties and top log-probabilities on the GPU (sample_extras_supported).
Napi::Value SamplingExtras(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), dcuda::sample_extras_supported(handle_of(info[0]).model->config().vocab));
}

// step(model, meta, T, S, R, params?, hostRows?, chain?, penalties?): a second step may be called before the first resolves; it
// is enqueued behind it (and may take its token ids from the first's sampled ids: chain). A third waits for neither
// and is refused, as is a second one that downloads logits while the first does.
Napi::Value Step(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle& h = handle_of(info[0]);
  const Napi::Int32Array meta = info[1].As<Napi::Int32Array>();
  dcuda::StepShape s{info[2].As<Napi::Number>().Int32Value(), info[3].As<Napi::Number>().Int32Value(),
                     info[4].As<Napi::Number>().Int32Value()};
  const size_t want = size_t(4) * s.T + s.R + size_t(s.S) * h.model->table_stride();
  if (meta.ElementLength() != want)
    throw Napi::RangeError::New(env, "step metadata has " + std::to_string(meta.ElementLength()) + " values, expected " + std::to_string(want));
  std::vector<dcuda::SampleParams> params = sample_params_of(info, 5, s.R);  // sampled step
  std::vector<int32_t> host_rows = host_rows_of(info.Length() > 6 ? info[6] : env.Undefined(), s.R);
  std::vector<int32_t> chain = chain_of(info.Length() > 7 ? info[7] : env.Undefined(), s.T);
  std::vector<int32_t> penalties = penalties_of(info.Length() > 8 ? info[8] : env.Undefined(), h.model->config().vocab);
  if (params.empty() && !penalties.empty()) throw Napi::Error::New(env, "penalties are for sampled steps");
  if (params.empty() && !host_rows.empty()) throw Napi::Error::New(env, "host rows are for sampled steps (logits steps return every row)");
  const bool downloads_logits = params.empty() || !host_rows.empty();
  if (h.busy && h.steps_in_flight == 0) throw Napi::Error::New(env, "a step is already running on this model (expert parallel)");
  if (h.steps_in_flight >= 2) throw Napi::Error::New(env, "two steps are already in flight on this model");
  if (downloads_logits && h.logits_in_flight)
    throw Napi::Error::New(env, "a step that downloads logits is already in flight on this model (only one may be)");
  auto* w = new StepWorker(env, h, h.model->take_turn(), std::vector<int32_t>(meta.Data(), meta.Data() + meta.ElementLength()), s,
                           std::move(params), std::move(host_rows), std::move(chain), std::move(penalties),
                           downloads_logits);
  h.busy = true;
  ++h.steps_in_flight;
  if (downloads_logits) h.logits_in_flight = true;
  Napi::Promise p = w->promise();
  w->Queue();
  return p;
}

Napi::Value ExportKv(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  if (h.busy) throw Napi::Error::New(info.Env(), "exportKv during a step");
  const Napi::Int32Array blocks = info[1].As<Napi::Int32Array>();
  const size_t bytes = blocks.ElementLength() * h.model->kv_bytes_per_block(info[2].As<Napi::Number>().Int32Value());
  Napi::Uint8Array out = Napi::Uint8Array::New(info.Env(), bytes);
  guarded(info.Env(), [&] { h.model->export_kv(blocks.Data(), int(blocks.ElementLength()), reinterpret_cast<uint16_t*>(out.Data())); return 0; });
  return out;
}

Napi::Value ImportKv(const Napi::CallbackInfo& info) {
  Handle& h = handle_of(info[0]);
  if (h.busy) throw Napi::Error::New(info.Env(), "importKv during a step");
  const Napi::Int32Array blocks = info[1].As<Napi::Int32Array>();
  const Napi::Uint8Array data = info[2].As<Napi::Uint8Array>();
  guarded(info.Env(), [&] { h.model->import_kv(blocks.Data(), int(blocks.ElementLength()), reinterpret_cast<const uint16_t*>(data.Data())); return 0; });
  return info.Env().Undefined();
}

Napi::Value Free(const Napi::CallbackInfo& info) {
  if (!info[0].IsExternal()) throw Napi::TypeError::New(info.Env(), "expected a model handle");
  Handle* h = info[0].As<Napi::External<Handle>>().Data();
  if (h->busy) throw Napi::Error::New(info.Env(), "free during a step");
  h->model.reset();
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("deviceInfo", Napi::Function::New(env, DeviceInfo));
  exports.Set("createModel", Napi::Function::New(env, CreateModel));
  exports.Set("upload", Napi::Function::New(env, Upload));
  exports.Set("random", Napi::Function::New(env, Random));
  exports.Set("uploadRanges", Napi::Function::New(env, UploadRanges));
  exports.Set("fill", Napi::Function::New(env, Fill));
  exports.Set("bind", Napi::Function::New(env, Bind));
  exports.Set("allocateKv", Napi::Function::New(env, AllocateKv));
  exports.Set("kvBytesPerBlock", Napi::Function::New(env, KvBytesPerBlock));
  exports.Set("weightBytes", Napi::Function::New(env, WeightBytes));
  exports.Set("setGraphs", Napi::Function::New(env, SetGraphs));
  exports.Set("graphsCaptured", Napi::Function::New(env, GraphsCaptured));
  exports.Set("step", Napi::Function::New(env, Step));
  exports.Set("samplingExtras", Napi::Function::New(env, SamplingExtras));
  exports.Set("exportKv", Napi::Function::New(env, ExportKv));
  exports.Set("importKv", Napi::Function::New(env, ImportKv));
  exports.Set("free", Napi::Function::New(env, Free));
  register_bench(env, exports);
  register_ep(env, exports);
  return exports;
}


}  // namespace
}  // namespace dcuda_binding

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return dcuda_binding::Init(env, exports); }

NODE_API_MODULE(dispatch_cuda, InitAddon)
