// Shared pieces of the CUDA addon's binding (addon.cpp, addon_bench.cpp): the model handle,
// argument helpers, the device check and the one place C++ errors become JS errors.
#pragma once
#include <napi.h>
#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include "check.h"
#include "model.h"

namespace dcuda_binding {

struct Handle {
  std::unique_ptr<dcuda::Model> model;
  // A step is in flight (every other call on the model refuses while one is). Up to two steps may be: the second
  // enqueued behind the first (addon.cpp Step); at most one of them downloads logits (the model has one such buffer).
  bool busy = false;
  int steps_in_flight = 0;
  bool logits_in_flight = false;
};

inline Handle& handle_of(const Napi::Value& v) {
  if (!v.IsExternal()) throw Napi::TypeError::New(v.Env(), "expected a model handle");
  Handle* h = v.As<Napi::External<Handle>>().Data();
  if (!h->model) throw Napi::Error::New(v.Env(), "model was freed");
  return *h;
}

inline int int_of(const Napi::Object& o, const char* key, int fallback = 0) {
  const Napi::Value v = o.Get(key);
  return v.IsNumber() ? v.As<Napi::Number>().Int32Value() : fallback;
}

inline float float_of(const Napi::Object& o, const char* key, float fallback = 0.f) {
  const Napi::Value v = o.Get(key);
  return v.IsNumber() ? v.As<Napi::Number>().FloatValue() : fallback;
}

inline bool bool_of(const Napi::Object& o, const char* key) {
  const Napi::Value v = o.Get(key);
  return v.IsBoolean() && v.As<Napi::Boolean>().Value();
}

// Throws a JS Error with code NO_CUDA_DEVICE when no device can be used.
inline void require_device(Napi::Env env) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky error of a failed probe
    Napi::Error e = Napi::Error::New(
        env, std::string("no CUDA device: ") + (err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0"));
    e.Set("code", Napi::String::New(env, "NO_CUDA_DEVICE"));
    throw e;
  }
}

// A step's sampling block (info[index], optional): Float64Array [R * (6 + kMaxBanned)] =
// temperature, topK, topP, seed, step, numBanned, banned[kMaxBanned] per logits row
// (model-server/src/backend/cuda/pack-step.ts packSampling). Empty when absent (v undefined).
// Per logits row: temperature, top_k, top_p, seed, step, banned count, kMaxBanned banned ids, frequency penalty,
// presence penalty, penalty pairs' offset and count, penalized input token (-1: none), top log-probabilities.
inline std::vector<dcuda::SampleParams> sample_params_from(const Napi::Value& v, int R) {
  constexpr size_t kParams = 12 + dcuda::kMaxBanned;
  std::vector<dcuda::SampleParams> params;
  if (v.IsUndefined()) return params;
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    throw Napi::TypeError::New(v.Env(), "sampling params must be a Float64Array");
  const Napi::Float64Array p = v.As<Napi::Float64Array>();
  if (p.ElementLength() != size_t(R) * kParams)
    throw Napi::RangeError::New(v.Env(), "sampling params need " + std::to_string(kParams) + " values per logits row");
  for (int r = 0; r < R; ++r) {
    const double* row = p.Data() + size_t(r) * kParams;
    dcuda::SampleParams sp{};
    sp.temperature = float(row[0]), sp.top_k = int32_t(row[1]), sp.top_p = float(row[2]);
    sp.seed = uint64_t(row[3]), sp.step = uint64_t(row[4]);
    sp.num_banned = int32_t(row[5]);
    if (sp.num_banned < 0 || sp.num_banned > dcuda::kMaxBanned)
      throw Napi::RangeError::New(v.Env(), "at most " + std::to_string(dcuda::kMaxBanned) + " banned ids per row");
    for (int b = 0; b < dcuda::kMaxBanned; ++b) sp.banned[b] = int32_t(row[6 + b]);
    const double* extra = row + 6 + dcuda::kMaxBanned;
    if (!std::isfinite(extra[0]) || !std::isfinite(extra[1]))
      throw Napi::RangeError::New(v.Env(), "penalties must be finite numbers");
    sp.frequency_penalty = float(extra[0]), sp.presence_penalty = float(extra[1]);
    sp.pen_offset = int32_t(extra[2]), sp.pen_count = int32_t(extra[3]), sp.pen_input = int32_t(extra[4]);
    sp.top_n = int32_t(extra[5]);
    if (sp.pen_offset < 0 || sp.pen_count < 0 || sp.pen_input < -1)
      throw Napi::RangeError::New(v.Env(), "penalty pairs' offset and count are >= 0, the penalized input token >= -1");
    if (sp.top_n < 0 || sp.top_n > dcuda::kMaxTopLogprobs)
      throw Napi::RangeError::New(v.Env(), "top log-probabilities per row: 0 to " + std::to_string(dcuda::kMaxTopLogprobs));
    params.push_back(sp);
  }
  return params;
}

// An optional Int32Array argument's values (empty when undefined); `what` names it in the TypeError.
inline std::vector<int32_t> int32s_of(const Napi::Value& v, const char* what) {
  if (v.IsUndefined()) return {};
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
    throw Napi::TypeError::New(v.Env(), std::string(what) + " must be an Int32Array");
  const Napi::Int32Array a = v.As<Napi::Int32Array>();
  return std::vector<int32_t>(a.Data(), a.Data() + a.ElementLength());
}

// A sampled step's rows whose logits go to the host (Int32Array of distinct rows in [0, R)); none when undefined.
inline std::vector<int32_t> host_rows_of(const Napi::Value& v, int R) {
  std::vector<int32_t> rows = int32s_of(v, "host rows");
  std::vector<char> seen(size_t(R > 0 ? R : 0), 0);
  for (const int32_t r : rows) {
    if (r < 0 || r >= R || seen[r]) throw Napi::RangeError::New(v.Env(), "host rows must be distinct rows in [0, " + std::to_string(R) + ")");
    seen[r] = 1;
  }
  return rows;
}

// A step's chained token sources (Model::run_turn): undefined, or an Int32Array of one entry per token, each -1 or a
// row of the previous sampled step.
inline std::vector<int32_t> chain_of(const Napi::Value& v, int T) {
  std::vector<int32_t> chain = int32s_of(v, "chain");
  if (!v.IsUndefined() && int(chain.size()) != T)
    throw Napi::RangeError::New(v.Env(), "chain has " + std::to_string(chain.size()) + " entries for " + std::to_string(T) + " tokens");
  for (const int32_t c : chain)
    if (c < -1) throw Napi::RangeError::New(v.Env(), "chain entries are -1 or a row of the previous step");
  return chain;
}

// A sampled step's penalty pairs: undefined, or an Int32Array of (token, count) pairs, tokens in [0, V), counts >= 1.
inline std::vector<int32_t> penalties_of(const Napi::Value& v, int V) {
  std::vector<int32_t> pairs = int32s_of(v, "penalties");
  if (pairs.size() % 2) throw Napi::RangeError::New(v.Env(), "penalties are (token, count) pairs");
  for (size_t i = 0; i < pairs.size(); i += 2)
    if (pairs[i] < 0 || pairs[i] >= V || pairs[i + 1] < 1)
      throw Napi::RangeError::New(v.Env(), "penalty pair (" + std::to_string(pairs[i]) + ", " + std::to_string(pairs[i + 1]) +
                                               "): the token must be in [0, " + std::to_string(V) + ") and the count >= 1");
  return pairs;
}

inline std::vector<dcuda::SampleParams> sample_params_of(const Napi::CallbackInfo& info, size_t index, int R) {
  return info.Length() <= index ? std::vector<dcuda::SampleParams>{} : sample_params_from(info[index], R);
}

template <typename F>
auto guarded(Napi::Env env, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

void register_bench(Napi::Env env, Napi::Object exports);
void register_ep(Napi::Env env, Napi::Object exports);  // addon_ep.cpp

}  // namespace dcuda_binding
