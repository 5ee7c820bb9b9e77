// Argument helpers for the binding: typed arrays, BigInt device pointers, option objects, and the
// one place where a native KernelError becomes a JS Error (code "DK_KERNEL").
#pragma once
#include <napi.h>
#include <string>
#include "../common/check.h"

namespace dispatch::napi {

template <typename T>
T* array_data(const Napi::Value& v, const char* what) {
  if (!v.IsTypedArray()) throw KernelError(std::string(what) + " must be a typed array");
  auto a = v.As<Napi::TypedArray>();
  return reinterpret_cast<T*>(static_cast<uint8_t*>(a.ArrayBuffer().Data()) + a.ByteOffset());
}

inline size_t array_len(const Napi::Value& v) { return v.As<Napi::TypedArray>().ElementLength(); }

inline void* ptr(const Napi::Value& v, const char* what) {
  if (v.IsUndefined() || v.IsNull()) return nullptr;
  if (!v.IsBigInt()) throw KernelError(std::string(what) + " must be a bigint device pointer");
  bool lossless = true;
  return reinterpret_cast<void*>(v.As<Napi::BigInt>().Uint64Value(&lossless));
}

inline int num(const Napi::Object& o, const char* key, int def = -1) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) {
    if (def < 0) throw KernelError(std::string("missing option ") + key);
    return def;
  }
  if (v.IsBoolean()) return v.As<Napi::Boolean>().Value() ? 1 : 0;
  if (!v.IsNumber()) throw KernelError(std::string("option ") + key + " must be a number");
  return v.As<Napi::Number>().Int32Value();
}

inline Napi::Value big(Napi::Env env, const void* p) {
  return Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)));
}

// Wraps a binding function: native errors become JS errors with a code.
template <Napi::Value (*F)(const Napi::CallbackInfo&)>
Napi::Value guarded(const Napi::CallbackInfo& info) {
  try {
    return F(info);
  } catch (const KernelError& e) {
    Napi::Error err = Napi::Error::New(info.Env(), e.what());
    err.Set("code", Napi::String::New(info.Env(), "DK_KERNEL"));
    throw err;
  }
}

}  // namespace dispatch::napi
