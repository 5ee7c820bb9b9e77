// Node binding of the CPU kernels: argument checks (with file:line) turned into JS
// errors here and nowhere else; no kernel logic. Calls are synchronous and short
// (one matrix product or one sequence's attention); the runner decides where they run.
#include <napi.h>

#include <cstdint>
#include <string>

#include "kernels.h"

#define DCPU_CHECK(env, cond, msg)                                                                       \
  do {                                                                                                   \
    if (!(cond)) {                                                                                       \
      throw Napi::RangeError::New(env, std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + (msg)); \
    }                                                                                                    \
  } while (0)

namespace {

Napi::Float32Array f32(const Napi::CallbackInfo& info, size_t i, const char* name) {
  DCPU_CHECK(info.Env(), info.Length() > i && info[i].IsTypedArray() &&
                             info[i].As<Napi::TypedArray>().TypedArrayType() == napi_float32_array,
             std::string(name) + " must be a Float32Array");
  return info[i].As<Napi::Float32Array>();
}

int num(const Napi::CallbackInfo& info, size_t i, const char* name) {
  DCPU_CHECK(info.Env(), info.Length() > i && info[i].IsNumber(), std::string(name) + " must be a number");
  return info[i].As<Napi::Number>().Int32Value();
}

// linear(x, w, out, T, K, N, bias?)
Napi::Value Linear(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto x = f32(info, 0, "x");
  auto w = f32(info, 1, "w");
  auto out = f32(info, 2, "out");
  const int T = num(info, 3, "T"), K = num(info, 4, "K"), N = num(info, 5, "N");
  DCPU_CHECK(env, T >= 0 && K > 0 && N > 0, "bad dimensions");
  DCPU_CHECK(env, x.ElementLength() >= static_cast<size_t>(T) * K, "x is smaller than T*K");
  DCPU_CHECK(env, w.ElementLength() >= static_cast<size_t>(N) * K, "w is smaller than N*K");
  DCPU_CHECK(env, out.ElementLength() >= static_cast<size_t>(T) * N, "out is smaller than T*N");
  const float* bias = nullptr;
  if (info.Length() > 6 && !info[6].IsUndefined() && !info[6].IsNull()) {
    auto b = f32(info, 6, "bias");
    DCPU_CHECK(env, b.ElementLength() >= static_cast<size_t>(N), "bias is smaller than N");
    bias = b.Data();
  }
  dispatch_cpu::linear(x.Data(), w.Data(), out.Data(), T, K, N, bias);
  return env.Undefined();
}

// attentionSeq(q, out, kCache, vCache, blockTable, qStart, qLen, startPos, B, Hq, Hkv, D, scale, window, scores)
Napi::Value AttentionSeq(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto q = f32(info, 0, "q");
  auto out = f32(info, 1, "out");
  auto k = f32(info, 2, "kCache");
  auto v = f32(info, 3, "vCache");
  DCPU_CHECK(env, info.Length() > 4 && info[4].IsTypedArray() && info[4].As<Napi::TypedArray>().TypedArrayType() == napi_int32_array,
             "blockTable must be an Int32Array");
  auto table = info[4].As<Napi::Int32Array>();
  const int qStart = num(info, 5, "qStart"), qLen = num(info, 6, "qLen"), startPos = num(info, 7, "startPos");
  const int B = num(info, 8, "B"), Hq = num(info, 9, "Hq"), Hkv = num(info, 10, "Hkv"), D = num(info, 11, "D");
  DCPU_CHECK(env, info.Length() > 12 && info[12].IsNumber(), "scale must be a number");
  const float scale = info[12].As<Napi::Number>().FloatValue();
  const int window = num(info, 13, "window");
  auto scores = f32(info, 14, "scores");
  DCPU_CHECK(env, B > 0 && Hq > 0 && Hkv > 0 && D > 0 && Hq % Hkv == 0, "bad head or block dimensions");
  const size_t end = static_cast<size_t>(startPos) + qLen;
  DCPU_CHECK(env, qStart >= 0 && qLen >= 0 && startPos >= 0, "negative offsets");
  DCPU_CHECK(env, table.ElementLength() * B >= end, "block table too short for the positions");
  DCPU_CHECK(env, scores.ElementLength() >= end, "scores buffer too small");
  DCPU_CHECK(env, q.ElementLength() >= static_cast<size_t>(qStart + qLen) * Hq * D, "q too small");
  DCPU_CHECK(env, out.ElementLength() >= static_cast<size_t>(qStart + qLen) * Hq * D, "out too small");
  const size_t blocks = k.ElementLength() / (static_cast<size_t>(B) * Hkv * D);
  DCPU_CHECK(env, v.ElementLength() == k.ElementLength(), "k and v caches differ in size");
  for (size_t i = 0; i * B < end; i++) {
    DCPU_CHECK(env, table[i] >= 0 && static_cast<size_t>(table[i]) < blocks, "block id outside the cache");
  }
  dispatch_cpu::attention_seq(q.Data(), out.Data(), k.Data(), v.Data(), table.Data(), qStart, qLen, startPos, B, Hq, Hkv,
                              D, scale, window, scores.Data());
  return env.Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("linear", Napi::Function::New(env, Linear, "linear"));
  exports.Set("attentionSeq", Napi::Function::New(env, AttentionSeq, "attentionSeq"));
  exports.Set("avx2", Napi::Boolean::New(env, dispatch_cpu::has_avx2()));
  return exports;
}

}  // namespace

NODE_API_MODULE(dispatch_cpu, Init)
