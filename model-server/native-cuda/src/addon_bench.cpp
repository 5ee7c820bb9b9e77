// Benchmark and test hooks of the CUDA addon: HBM bandwidth, the dense GEMM on its own, and the
// per-op-group step profile. Registered by addon.cpp's Init; no kernel logic here either.
#include "binding.h"
#include <cstring>
#include <vector>
#include "ops.h"

namespace dcuda_binding {
namespace {

// HBM bandwidth in bytes/s from device-to-device copies of a `bytes` buffer (each copy reads and
// writes it once: 2 * bytes moved), best of `reps`; the roofline's denominator, measured in the
// same process as the step it bounds.
Napi::Value MeasureHbm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  require_device(env);
  const double bytes_d = info[0].As<Napi::Number>().DoubleValue();
  const int reps = info[1].As<Napi::Number>().Int32Value();
  return guarded(env, [&] {
    const size_t bytes = size_t(bytes_d);
    void *a = nullptr, *b = nullptr;
    DC_CUDA(cudaMalloc(&a, bytes));
    DC_CUDA(cudaMalloc(&b, bytes));
    cudaEvent_t e0, e1;
    DC_CUDA(cudaEventCreate(&e0));
    DC_CUDA(cudaEventCreate(&e1));
    float best = 1e30f;
    DC_CUDA(cudaMemset(a, 1, bytes));
    for (int r = 0; r < reps + 1; ++r) {
      DC_CUDA(cudaEventRecord(e0));
      DC_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
      DC_CUDA(cudaEventRecord(e1));
      DC_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      DC_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (r > 0 && ms < best) best = ms;  // the first copy warms up
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return Napi::Number::New(env, 2.0 * double(bytes) / (double(best) * 1e-3));
  });
}

// Test hook: Y = X . W^T (+ Y when accumulate) through dcuda::gemm, bf16-rounded inputs, fp32 Y.
// x [T, K], w [N, K], y [T, N] (the initial Y when accumulating); returns the new Y.
Napi::Value TestGemm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  require_device(env);
  const Napi::Float32Array x = info[0].As<Napi::Float32Array>();
  const Napi::Float32Array w = info[1].As<Napi::Float32Array>();
  const Napi::Float32Array y0 = info[2].As<Napi::Float32Array>();
  const int T = info[3].As<Napi::Number>().Int32Value();
  const int K = info[4].As<Napi::Number>().Int32Value();
  const int N = info[5].As<Napi::Number>().Int32Value();
  const bool acc = info[6].ToBoolean().Value();
  if (x.ElementLength() != size_t(T) * K || w.ElementLength() != size_t(N) * K || y0.ElementLength() != size_t(T) * N)
    throw Napi::RangeError::New(env, "testGemm: sizes do not match T, K, N");
  return guarded(env, [&] {
    std::vector<uint16_t> xb(x.ElementLength()), wb(w.ElementLength());
    dcuda::f32_to_bf16_host(x.Data(), xb.data(), xb.size());
    dcuda::f32_to_bf16_host(w.Data(), wb.data(), wb.size());
    void *dx, *dw, *dy;
    DC_CUDA(cudaMalloc(&dx, xb.size() * 2 + 16));
    DC_CUDA(cudaMalloc(&dw, wb.size() * 2 + 16));
    DC_CUDA(cudaMalloc(&dy, y0.ElementLength() * 4 + 16));
    DC_CUDA(cudaMemcpy(dx, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
    DC_CUDA(cudaMemcpy(dw, wb.data(), wb.size() * 2, cudaMemcpyHostToDevice));
    DC_CUDA(cudaMemcpy(dy, y0.Data(), y0.ElementLength() * 4, cudaMemcpyHostToDevice));
    dcuda::gemm(static_cast<dcuda::bf16*>(dx), T, K, static_cast<dcuda::bf16*>(dw), N, nullptr, static_cast<float*>(dy), acc, 0);
    Napi::Float32Array out = Napi::Float32Array::New(env, y0.ElementLength());
    DC_CUDA(cudaMemcpy(out.Data(), dy, y0.ElementLength() * 4, cudaMemcpyDeviceToHost));
    cudaFree(dx), cudaFree(dw), cudaFree(dy);
    return out;
  });
}

Napi::Value ProfileStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle& h = handle_of(info[0]);
  if (h.busy) throw Napi::Error::New(env, "profileStep during a step");
  const Napi::Int32Array meta = info[1].As<Napi::Int32Array>();
  dcuda::StepShape s{info[2].As<Napi::Number>().Int32Value(), info[3].As<Napi::Number>().Int32Value(),
                     info[4].As<Napi::Number>().Int32Value()};
  const size_t want = size_t(4) * s.T + s.R + size_t(s.S) * h.model->table_stride();
  if (meta.ElementLength() != want) throw Napi::RangeError::New(env, "step metadata has the wrong length");
  return guarded(env, [&] {
    const auto rows = h.model->profile(meta.Data(), s);
    Napi::Object o = Napi::Object::New(env);
    for (const auto& [name, ms] : rows) o.Set(name, ms);
    return o;
  });
}

}  // namespace

void register_bench(Napi::Env env, Napi::Object exports) {
  exports.Set("measureHbm", Napi::Function::New(env, MeasureHbm));
  exports.Set("testGemm", Napi::Function::New(env, TestGemm));
  exports.Set("profileStep", Napi::Function::New(env, ProfileStep));
}

}  // namespace dcuda_binding
