// The addon (dispatch_ep.node): NCCL groups and dispatch/combine for one rank per process.
// Holds no dispatch logic: it converts arguments, runs EpBackend calls off the event loop,
// and turns native errors into JS errors with code DEP_NATIVE.
//   ncclVersion() -> {version, error}          deepEp() -> {available, error}
//   uniqueId() -> Uint8Array(128)              (rank 0; hand it to every rank out of band)
//   createGroup({uniqueId, rank, ranks, device, numExperts, hidden, topK, placement,
//                maxTokensHt, maxTokensLl, align, backend: "nccl" | "p2p" | "deepep"}) -> group
//       p2p: NVLink peer writes (ranks on one host; bootstrapped through the NCCL group)
//       llWire: "capacity" (default) | "tokens": the NCCL backend's low-latency wire (ep.h)
//   roundTrip(group, mode, x, ids, weights, scale) -> Promise<Float32Array>
//       dispatch, expert e := scale[e] * row, combine: the device path checked against the
//       TypeScript reference (test expert; the model's grouped GEMM takes its place in serving)
//   backendName(group), destroyGroup(group)
#include <dlfcn.h>
#include <napi.h>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include "check.h"
#include "ep.h"
#include "ep_kernels.cuh"

namespace dispatch::ep {
namespace {

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return uint16_t(u >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::string pluginPath(std::string* why) {
  if (const char* env = std::getenv("DISPATCH_EP_DEEPEP_LIB")) return env;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&pluginPath), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    return self.substr(0, self.find_last_of('/') + 1) + "libdispatch_ep_deepep.so";
  }
  if (why) *why = "cannot locate the addon's directory";
  return "";
}

CreateDeepEpFn loadDeepEp(std::string* why) {
  const std::string path = pluginPath(why);
  if (path.empty()) return nullptr;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (why) *why = dlerror();
    return nullptr;
  }
  auto fn = reinterpret_cast<CreateDeepEpFn>(dlsym(h, kDeepEpCreateSymbol));
  if (!fn && why) *why = std::string(path) + " lacks " + kDeepEpCreateSymbol;
  return fn;
}

struct Group {
  EpConfig cfg;
  // Calls are collective and ordered: one round trip at a time per group, even if JS does not await.
  std::mutex busy;
  std::unique_ptr<EpBackend> nccl;
  std::unique_ptr<EpBackend> deepep;  // used when present
  std::unique_ptr<EpBackend> p2p;     // used when present
  cudaStream_t stream = nullptr;
  EpBackend& active() { return deepep ? *deepep : p2p ? *p2p : *nccl; }
  ~Group() {
    deepep.reset();
    p2p.reset();
    nccl.reset();
    if (stream) cudaStreamDestroy(stream);
  }
};

Napi::Error jsError(Napi::Env env, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, "DEP_NATIVE"));
  return e;
}

Napi::Value NcclVersion(const Napi::CallbackInfo& info) {
  std::string why;
  const int v = ncclVersionOrZero(&why);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("version", v);
  o.Set("error", v ? info.Env().Null() : Napi::String::New(info.Env(), why));
  return o;
}

Napi::Value DeepEp(const Napi::CallbackInfo& info) {
  std::string why;
  const bool ok = loadDeepEp(&why) != nullptr;
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("available", ok);
  o.Set("error", ok ? info.Env().Null() : Napi::String::New(info.Env(), why));
  return o;
}

Napi::Value UniqueId(const Napi::CallbackInfo& info) {
  try {
    const auto id = ncclUniqueIdBytes();
    auto out = Napi::Uint8Array::New(info.Env(), id.size());
    std::memcpy(out.Data(), id.data(), id.size());
    return out;
  } catch (const std::exception& e) {
    throw jsError(info.Env(), e.what());
  }
}

Napi::Value CreateGroup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = info[0].As<Napi::Object>();
  auto g = std::make_unique<Group>();
  EpConfig& c = g->cfg;
  auto num = [&](const char* k, int def) { return o.Has(k) && o.Get(k).IsNumber() ? o.Get(k).As<Napi::Number>().Int32Value() : def; };
  c.rank = num("rank", 0);
  c.num_ranks = num("ranks", 1);
  c.device = num("device", 0);
  c.num_experts = num("numExperts", 0);
  c.hidden = num("hidden", 0);
  c.top_k = num("topK", 0);
  c.max_tokens_ht = num("maxTokensHt", 4096);
  c.max_tokens_ll = num("maxTokensLl", 128);
  c.align = num("align", 1);
  c.ll_wire_tokens = o.Has("llWire") && o.Get("llWire").IsString() && o.Get("llWire").As<Napi::String>().Utf8Value() == "tokens";
  Napi::Array pl = o.Get("placement").As<Napi::Array>();
  for (uint32_t r = 0; r < pl.Length(); ++r) {
    Napi::Array list = pl.Get(r).As<Napi::Array>();
    c.placement.emplace_back();
    for (uint32_t i = 0; i < list.Length(); ++i) c.placement.back().push_back(list.Get(i).As<Napi::Number>().Int32Value());
  }
  Napi::Uint8Array id = o.Get("uniqueId").As<Napi::Uint8Array>();
  if (id.ByteLength() != 128) throw jsError(env, "uniqueId must be 128 bytes");
  const std::string backend = o.Has("backend") ? o.Get("backend").As<Napi::String>().Utf8Value() : "nccl";
  if (backend != "nccl" && backend != "p2p" && backend != "deepep") throw jsError(env, "backend must be nccl, p2p or deepep");
  try {
    EP_CUDA(cudaSetDevice(c.device));
    EP_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    g->nccl = createNcclBackend(c, id.Data());
    if (backend == "deepep") {
      std::string why;
      CreateDeepEpFn create = loadDeepEp(&why);
      EpBackend* b = create ? create(c, *g->nccl, &why) : nullptr;
      if (!b) throw EpNativeError("DeepEP backend unavailable: " + why);
      g->deepep.reset(b);
    } else if (backend == "p2p") {
      g->p2p = createP2pBackend(c, *g->nccl);
    }
  } catch (const std::exception& e) {
    throw jsError(env, e.what());
  }
  return Napi::External<Group>::New(env, g.release(), [](Napi::Env, Group* p) { delete p; });
}

class RoundTrip : public Napi::AsyncWorker {
 public:
  RoundTrip(Napi::Env env, Group* g, bool ll, std::vector<float> x, std::vector<int32_t> ids, std::vector<float> w, std::vector<float> scale)
      : Napi::AsyncWorker(env), g_(g), ll_(ll), x_(std::move(x)), ids_(std::move(ids)), w_(std::move(w)), scale_(std::move(scale)),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      run();
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    auto out = Napi::Float32Array::New(Env(), out_.size());
    std::memcpy(out.Data(), out_.data(), out_.size() * 4);
    deferred_.Resolve(out);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(jsError(Env(), e.Message()).Value()); }

 private:
  void run() {
    std::lock_guard<std::mutex> lock(g_->busy);
    const EpConfig& c = g_->cfg;
    const int H = c.hidden, k = c.top_k, T = int(ids_.size()) / k;
    cudaStream_t s = g_->stream;
    EP_CUDA(cudaSetDevice(c.device));
    std::vector<uint16_t> xb(x_.size());
    for (size_t i = 0; i < x_.size(); ++i) xb[i] = toBf16(x_[i]);
    void *dx, *dout;
    int32_t* dids;
    float *dw, *dscale;
    EP_CUDA(cudaMalloc(&dx, xb.size() * 2 + 16));
    EP_CUDA(cudaMalloc(&dout, xb.size() * 2 + 16));
    EP_CUDA(cudaMalloc(&dids, ids_.size() * 4 + 4));
    EP_CUDA(cudaMalloc(&dw, w_.size() * 4 + 4));
    EP_CUDA(cudaMalloc(&dscale, scale_.size() * 4 + 4));
    struct Free {
      std::vector<void*> p;
      ~Free() { for (void* q : p) cudaFree(q); }
    } guard{{dx, dout, dids, dw, dscale}};
    EP_CUDA(cudaMemcpyAsync(dx, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice, s));
    EP_CUDA(cudaMemcpyAsync(dids, ids_.data(), ids_.size() * 4, cudaMemcpyHostToDevice, s));
    EP_CUDA(cudaMemcpyAsync(dw, w_.data(), w_.size() * 4, cudaMemcpyHostToDevice, s));
    EP_CUDA(cudaMemcpyAsync(dscale, scale_.data(), scale_.size() * 4, cudaMemcpyHostToDevice, s));
    EpBackend& b = g_->active();
    const int Le = b.numLocalExperts();
    if (ll_) {
      LlRows r = b.dispatchLl(dx, dids, T, s);
      launchScaleRows(r.xs, r.ys, nullptr, r.counts, r.cap, b.localToGlobal(), dscale, Le, H, Le * r.cap, s);
      b.combineLl(dids, dw, dout, s);
    } else {
      HtRows r = b.dispatchHt(dx, dids, dw, T, s);
      launchScaleRows(r.xs, r.ys, r.offsets, nullptr, 0, b.localToGlobal(), dscale, Le, H, r.max_rows, s);
      b.combineHt(dout, s);
    }
    std::vector<uint16_t> ob(size_t(T) * H);
    EP_CUDA(cudaMemcpyAsync(ob.data(), dout, ob.size() * 2, cudaMemcpyDeviceToHost, s));
    EP_CUDA(cudaStreamSynchronize(s));
    out_.resize(ob.size());
    for (size_t i = 0; i < ob.size(); ++i) out_[i] = fromBf16(ob[i]);
  }

  Group* g_;
  bool ll_;
  std::vector<float> x_, out_;
  std::vector<int32_t> ids_;
  std::vector<float> w_, scale_;
  Napi::Promise::Deferred deferred_;
};

template <typename A, typename T>
std::vector<T> copyOf(const Napi::Value& v) {
  A a = v.As<A>();
  return std::vector<T>(a.Data(), a.Data() + a.ElementLength());
}

Napi::Value RoundTripJs(const Napi::CallbackInfo& info) {
  Group* g = info[0].As<Napi::External<Group>>().Data();
  const bool ll = info[1].As<Napi::String>().Utf8Value() == "low-latency";
  auto* w = new RoundTrip(info.Env(), g, ll, copyOf<Napi::Float32Array, float>(info[2]), copyOf<Napi::Int32Array, int32_t>(info[3]),
                          copyOf<Napi::Float32Array, float>(info[4]), copyOf<Napi::Float32Array, float>(info[5]));
  Napi::Promise p = w->promise();
  w->Queue();
  return p;
}

Napi::Value BackendName(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), info[0].As<Napi::External<Group>>().Data()->active().name());
}

Napi::Value DestroyGroup(const Napi::CallbackInfo& info) {
  Group* g = info[0].As<Napi::External<Group>>().Data();
  g->deepep.reset();
  g->p2p.reset();
  g->nccl.reset();
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("ncclVersion", Napi::Function::New(env, NcclVersion));
  exports.Set("deepEp", Napi::Function::New(env, DeepEp));
  exports.Set("uniqueId", Napi::Function::New(env, UniqueId));
  exports.Set("createGroup", Napi::Function::New(env, CreateGroup));
  exports.Set("roundTrip", Napi::Function::New(env, RoundTripJs));
  exports.Set("backendName", Napi::Function::New(env, BackendName));
  exports.Set("destroyGroup", Napi::Function::New(env, DestroyGroup));
  return exports;
}

}  // namespace
}  // namespace dispatch::ep

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return dispatch::ep::Init(env, exports); }
NODE_API_MODULE(dispatch_ep, InitAddon)
