// The addon's entry: { cpu: references, gpu: CUDA launches, paths: which kernel a launch takes }. Loaded only by
// kernels/index.ts.
#include <napi.h>

namespace dispatch::napi {
Napi::Object cpu_exports(Napi::Env env);
Napi::Object gpu_exports(Napi::Env env);
Napi::Object paths_exports(Napi::Env env);
}  // namespace dispatch::napi

static Napi::Object init(Napi::Env env, Napi::Object exports) {
  exports.Set("cpu", dispatch::napi::cpu_exports(env));
  exports.Set("gpu", dispatch::napi::gpu_exports(env));
  exports.Set("paths", dispatch::napi::paths_exports(env));
  return exports;
}

NODE_API_MODULE(dispatch_kernels, init)
