// GPU side of the binding: device memory, streams, async copies and the kernel launches.
// Launches only enqueue work on a stream and return; whatever waits (stream sync, device->host
// copy) runs in a worker thread and resolves a Promise, so the event loop never blocks.
#include <cuda_runtime.h>
#include <functional>
#include "napi_util.h"
#include "../gemm/grouped_gemm.h"
#include "../moe/moe_ops.h"

namespace dispatch::napi {
namespace {

cudaStream_t stream_of(const Napi::Object& o) { return static_cast<cudaStream_t>(ptr(o.Get("stream"), "stream")); }

// Runs `work` off the event loop; resolves with undefined or rejects with the native error.
class Waiter : public Napi::AsyncWorker {
 public:
  Waiter(Napi::Env env, std::function<void()> work, Napi::Value keep)
      : Napi::AsyncWorker(env), work_(std::move(work)), deferred_(Napi::Promise::Deferred::New(env)) {
    if (keep.IsObject()) keep_ = Napi::Persistent(keep.As<Napi::Object>());  // host buffer stays alive
  }
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      work_();
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(Env().Undefined()); }
  void OnError(const Napi::Error& e) override {
    Napi::Error err = Napi::Error::New(Env(), e.Message());
    err.Set("code", Napi::String::New(Env(), "DK_KERNEL"));
    deferred_.Reject(err.Value());
  }

 private:
  std::function<void()> work_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference keep_;
};

Napi::Value available(const Napi::CallbackInfo& info) {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();  // clear the sticky "no device" error
  return Napi::Boolean::New(info.Env(), ok);
}

Napi::Value device_malloc(const Napi::CallbackInfo& info) {
  void* p = nullptr;
  DK_CUDA(cudaMalloc(&p, size_t(info[0].As<Napi::Number>().Int64Value())));
  return big(info.Env(), p);
}

Napi::Value device_free(const Napi::CallbackInfo& info) {
  DK_CUDA(cudaFree(ptr(info[0], "ptr")));
  return info.Env().Undefined();
}

Napi::Value stream_create(const Napi::CallbackInfo& info) {
  cudaStream_t s = nullptr;
  DK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return big(info.Env(), s);
}

Napi::Value stream_destroy(const Napi::CallbackInfo& info) {
  DK_CUDA(cudaStreamDestroy(static_cast<cudaStream_t>(ptr(info[0], "stream"))));
  return info.Env().Undefined();
}

// upload(dst, typedArray, stream): enqueued; the host array is read before the call returns
// (pageable host memory is staged by the driver).
Napi::Value upload(const Napi::CallbackInfo& info) {
  auto a = info[1].As<Napi::TypedArray>();
  DK_CUDA(cudaMemcpyAsync(ptr(info[0], "dst"), array_data<uint8_t>(info[1], "src"), a.ByteLength(),
                          cudaMemcpyHostToDevice, static_cast<cudaStream_t>(ptr(info[2], "stream"))));
  return info.Env().Undefined();
}

// download(typedArray, src, stream) -> Promise<void>, resolved once the bytes are on the host.
Napi::Value download(const Napi::CallbackInfo& info) {
  auto a = info[0].As<Napi::TypedArray>();
  uint8_t* dst = array_data<uint8_t>(info[0], "dst");
  const size_t bytes = a.ByteLength();
  void* src = ptr(info[1], "src");
  auto s = static_cast<cudaStream_t>(ptr(info[2], "stream"));
  auto* w = new Waiter(info.Env(), [=] {
    DK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    DK_CUDA(cudaStreamSynchronize(s));
  }, info[0]);
  w->Queue();
  return w->promise();
}

Napi::Value synchronize(const Napi::CallbackInfo& info) {
  auto s = static_cast<cudaStream_t>(ptr(info[0], "stream"));
  auto* w = new Waiter(info.Env(), [=] { DK_CUDA(cudaStreamSynchronize(s)); }, info.Env().Undefined());
  w->Queue();
  return w->promise();
}

ExpertRows rows_of(const Napi::Object& o) {
  return ExpertRows{static_cast<const int*>(ptr(o.Get("offsets"), "offsets")),
                    static_cast<const int*>(ptr(o.Get("counts"), "counts")), num(o, "cap", 0)};
}

// sm90_bf16_grouped_gemm_masked({x, w, y, offsets | counts+cap, E, N, K, maxRows, maxActive?, stream})
Napi::Value grouped_gemm_masked(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  sm90_bf16_grouped_gemm_masked(ptr(o.Get("x"), "x"), ptr(o.Get("w"), "w"), ptr(o.Get("y"), "y"), rows_of(o),
                                num(o, "E"), num(o, "N"), num(o, "K"), num(o, "maxRows"), num(o, "maxActive", 0),
                                stream_of(o), num(o, "fuseSilu", 0) != 0);
  return info.Env().Undefined();
}

// sm90_w8a16_grouped_gemm_masked({..., scales})
Napi::Value w8a16_grouped_gemm_masked(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  sm90_w8a16_grouped_gemm_masked(ptr(o.Get("x"), "x"), static_cast<const int8_t*>(ptr(o.Get("w"), "w")),
                                 static_cast<const float*>(ptr(o.Get("scales"), "scales")), ptr(o.Get("y"), "y"),
                                 rows_of(o), num(o, "E"), num(o, "N"), num(o, "K"), num(o, "maxRows"),
                                 num(o, "maxActive", 0), stream_of(o), num(o, "fuseSilu", 0) != 0);
  return info.Env().Undefined();
}

// sm90_bf16_grouped_gemm_contiguous({x, w, y, offsets, M, E, N, K, stream})
Napi::Value grouped_gemm_contiguous(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  sm90_bf16_grouped_gemm_contiguous(ptr(o.Get("x"), "x"), ptr(o.Get("w"), "w"), ptr(o.Get("y"), "y"),
                                    static_cast<const int*>(ptr(o.Get("offsets"), "offsets")), num(o, "M"),
                                    num(o, "E"), num(o, "N"), num(o, "K"), stream_of(o), num(o, "fuseSilu", 0) != 0);
  return info.Env().Undefined();
}

// interleave_gate_up({src, dst, E, I, K, elemBytes, stream}): weight layout for fuseSilu.
Napi::Value interleave(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  interleave_gate_up(ptr(o.Get("src"), "src"), ptr(o.Get("dst"), "dst"), num(o, "E"), num(o, "I"), num(o, "K"),
                     num(o, "elemBytes"), stream_of(o));
  return info.Env().Undefined();
}

// moe_grouped_gemm_bf16({x, w, y, offsets, M, T, E, N, K, stream}): path chosen from T.
Napi::Value moe_grouped_gemm(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  moe_grouped_gemm_bf16(ptr(o.Get("x"), "x"), ptr(o.Get("w"), "w"), ptr(o.Get("y"), "y"),
                        static_cast<const int*>(ptr(o.Get("offsets"), "offsets")), num(o, "M"), num(o, "T"),
                        num(o, "E"), num(o, "N"), num(o, "K"), stream_of(o), num(o, "fuseSilu", 0) != 0);
  return info.Env().Undefined();
}

// sm90_f32_router_topk({logits, bias?, T, numExperts, topK, scoring?, renormalize?, numGroups?, topkGroups?, scale?, ids, weights, stream})
Napi::Value router_topk(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  RouterConfig c;
  c.num_experts = num(o, "numExperts");
  c.top_k = num(o, "topK");
  Napi::Value s = o.Get("scoring");
  c.scoring = s.IsString() && s.As<Napi::String>().Utf8Value() == "sigmoid" ? Scoring::kSigmoid : Scoring::kSoftmax;
  Napi::Value r = o.Get("renormalize");
  c.renormalize = r.IsUndefined() ? true : r.ToBoolean().Value();
  c.num_groups = num(o, "numGroups", 1);
  c.topk_groups = num(o, "topkGroups", 1);
  Napi::Value sc = o.Get("scale");
  c.scale = sc.IsUndefined() ? 1.f : sc.As<Napi::Number>().FloatValue();
  sm90_f32_router_topk(static_cast<const float*>(ptr(o.Get("logits"), "logits")),
                       static_cast<const float*>(ptr(o.Get("bias"), "bias")), num(o, "T"), c,
                       static_cast<int32_t*>(ptr(o.Get("ids"), "ids")), static_cast<float*>(ptr(o.Get("weights"), "weights")),
                       stream_of(o));
  return info.Env().Undefined();
}

// sm90_i32_moe_align({ids, M, E, cap?, counts, offsets?, slotRow, stream})
Napi::Value moe_align(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  sm90_i32_moe_align(static_cast<const int32_t*>(ptr(o.Get("ids"), "ids")), num(o, "M"), num(o, "E"), num(o, "cap", 0),
                     static_cast<int32_t*>(ptr(o.Get("counts"), "counts")),
                     static_cast<int32_t*>(ptr(o.Get("offsets"), "offsets")),
                     static_cast<int32_t*>(ptr(o.Get("slotRow"), "slotRow")), nullptr, stream_of(o));
  return info.Env().Undefined();
}

// sm90_bf16_moe_permute({x, slotRow, T, k, H, xp, stream})
Napi::Value moe_permute(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  sm90_bf16_moe_permute(ptr(o.Get("x"), "x"), static_cast<const int32_t*>(ptr(o.Get("slotRow"), "slotRow")),
                        num(o, "T"), num(o, "k"), num(o, "H"), ptr(o.Get("xp"), "xp"), stream_of(o));
  return info.Env().Undefined();
}

// sm90_bf16_moe_unpermute({y, slotRow, weights, T, k, H, out, stream})
Napi::Value moe_unpermute(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  sm90_bf16_moe_unpermute(ptr(o.Get("y"), "y"), static_cast<const int32_t*>(ptr(o.Get("slotRow"), "slotRow")),
                          static_cast<const float*>(ptr(o.Get("weights"), "weights")), num(o, "T"), num(o, "k"),
                          num(o, "H"), ptr(o.Get("out"), "out"), stream_of(o));
  return info.Env().Undefined();
}

// sm90_bf16_silu_mul({h, rows, I, act, stream})
Napi::Value silu_mul(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  sm90_bf16_silu_mul(ptr(o.Get("h"), "h"), num(o, "rows"), num(o, "I"), ptr(o.Get("act"), "act"), stream_of(o));
  return info.Env().Undefined();
}

// quantizeInt8Streaming(hostW: Uint16Array [E,N,K], E, N, K, q, scales, stream) -> Promise<void>
Napi::Value quantize_streaming(const Napi::CallbackInfo& info) {
  const uint16_t* w = array_data<uint16_t>(info[0], "w");
  const int E = info[1].As<Napi::Number>(), N = info[2].As<Napi::Number>(), K = info[3].As<Napi::Number>();
  DK_CHECK(array_len(info[0]) == size_t(E) * N * K, "w must be [E, N, K]");
  auto* q = static_cast<int8_t*>(ptr(info[4], "q"));
  auto* s = static_cast<float*>(ptr(info[5], "scales"));
  auto st = static_cast<cudaStream_t>(ptr(info[6], "stream"));
  auto* worker = new Waiter(info.Env(), [=] { quantize_int8_streaming(w, E, N, K, q, s, st); }, info[0]);
  worker->Queue();
  return worker->promise();
}

}  // namespace

Napi::Object gpu_exports(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", Napi::Function::New<guarded<available>>(env));
  o.Set("malloc", Napi::Function::New<guarded<device_malloc>>(env));
  o.Set("free", Napi::Function::New<guarded<device_free>>(env));
  o.Set("streamCreate", Napi::Function::New<guarded<stream_create>>(env));
  o.Set("streamDestroy", Napi::Function::New<guarded<stream_destroy>>(env));
  o.Set("upload", Napi::Function::New<guarded<upload>>(env));
  o.Set("download", Napi::Function::New<guarded<download>>(env));
  o.Set("synchronize", Napi::Function::New<guarded<synchronize>>(env));
  o.Set("sm90_bf16_grouped_gemm_masked", Napi::Function::New<guarded<grouped_gemm_masked>>(env));
  o.Set("sm90_w8a16_grouped_gemm_masked", Napi::Function::New<guarded<w8a16_grouped_gemm_masked>>(env));
  o.Set("sm90_bf16_grouped_gemm_contiguous", Napi::Function::New<guarded<grouped_gemm_contiguous>>(env));
  o.Set("interleave_gate_up", Napi::Function::New<guarded<interleave>>(env));
  o.Set("moe_grouped_gemm_bf16", Napi::Function::New<guarded<moe_grouped_gemm>>(env));
  o.Set("sm90_f32_router_topk", Napi::Function::New<guarded<router_topk>>(env));
  o.Set("sm90_i32_moe_align", Napi::Function::New<guarded<moe_align>>(env));
  o.Set("sm90_bf16_moe_permute", Napi::Function::New<guarded<moe_permute>>(env));
  o.Set("sm90_bf16_moe_unpermute", Napi::Function::New<guarded<moe_unpermute>>(env));
  o.Set("sm90_bf16_silu_mul", Napi::Function::New<guarded<silu_mul>>(env));
  o.Set("quantizeInt8Streaming", Napi::Function::New<guarded<quantize_streaming>>(env));
  return o;
}

}  // namespace dispatch::napi
