// CPU references exposed to JS (the CPU backend and the tests). bf16 travels as Uint16Array.
#include "napi_util.h"
#include "../ref/reference.h"

namespace dispatch::napi {
namespace {

template <typename T, typename A>
A make(Napi::Env env, size_t n) {
  return A::New(env, n);
}

RouterConfig router_config(const Napi::Object& o) {
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
  return c;
}

// groupedGemmBf16(x, w, offsets, E, N, K) -> Uint16Array [offsets[E], N]
Napi::Value grouped_gemm_bf16(const Napi::CallbackInfo& info) {
  const int E = info[3].As<Napi::Number>(), N = info[4].As<Napi::Number>(), K = info[5].As<Napi::Number>();
  const int32_t* off = array_data<int32_t>(info[2], "offsets");
  DK_CHECK(array_len(info[2]) == size_t(E) + 1, "offsets must have E+1 entries");
  DK_CHECK(array_len(info[1]) == size_t(E) * N * K, "w must be [E, N, K]");
  DK_CHECK(array_len(info[0]) >= size_t(off[E]) * K, "x must be [M, K]");
  auto y = Napi::Uint16Array::New(info.Env(), size_t(off[E]) * N);
  ref::HostRows rows{off, nullptr, 0};
  ref::grouped_gemm_bf16(array_data<uint16_t>(info[0], "x"), array_data<uint16_t>(info[1], "w"), y.Data(), rows, E, N, K);
  return y;
}

// groupedGemmW8a16(x, q, scales, offsets, E, N, K) -> Uint16Array
Napi::Value grouped_gemm_w8a16(const Napi::CallbackInfo& info) {
  const int E = info[4].As<Napi::Number>(), N = info[5].As<Napi::Number>(), K = info[6].As<Napi::Number>();
  const int32_t* off = array_data<int32_t>(info[3], "offsets");
  DK_CHECK(array_len(info[3]) == size_t(E) + 1, "offsets must have E+1 entries");
  DK_CHECK(array_len(info[1]) == size_t(E) * N * K && array_len(info[2]) == size_t(E) * N, "q [E,N,K], scales [E,N]");
  DK_CHECK(array_len(info[0]) >= size_t(off[E]) * K, "x must be [M, K]");
  auto y = Napi::Uint16Array::New(info.Env(), size_t(off[E]) * N);
  ref::HostRows rows{off, nullptr, 0};
  ref::grouped_gemm_w8a16(array_data<uint16_t>(info[0], "x"), array_data<int8_t>(info[1], "q"),
                          array_data<float>(info[2], "scales"), y.Data(), rows, E, N, K);
  return y;
}

// routerTopk(logits, T, cfg) -> { ids, weights }
Napi::Value router_topk(const Napi::CallbackInfo& info) {
  const int T = info[1].As<Napi::Number>();
  const RouterConfig c = router_config(info[2].As<Napi::Object>());
  DK_CHECK(array_len(info[0]) == size_t(T) * c.num_experts, "logits must be [T, E]");
  DK_CHECK(c.top_k >= 1 && c.top_k <= c.num_experts, "topK must be in [1, E]");
  DK_CHECK(c.num_groups >= 1 && c.num_experts % c.num_groups == 0 && c.topk_groups <= c.num_groups, "bad groups");
  Napi::Value b = info[2].As<Napi::Object>().Get("bias");
  const float* bias = b.IsTypedArray() ? array_data<float>(b, "bias") : nullptr;
  auto ids = Napi::Int32Array::New(info.Env(), size_t(T) * c.top_k);
  auto w = Napi::Float32Array::New(info.Env(), size_t(T) * c.top_k);
  ref::router_topk(array_data<float>(info[0], "logits"), bias, T, c, ids.Data(), w.Data());
  auto out = Napi::Object::New(info.Env());
  out.Set("ids", ids);
  out.Set("weights", w);
  return out;
}

// moeAlign(ids, E, cap) -> { counts, offsets, slotRow }
Napi::Value moe_align(const Napi::CallbackInfo& info) {
  const int E = info[1].As<Napi::Number>(), cap = info[2].As<Napi::Number>();
  const int M = int(array_len(info[0]));
  const int32_t* ids = array_data<int32_t>(info[0], "ids");
  for (int s = 0; s < M; ++s) DK_CHECK(ids[s] >= 0 && ids[s] < E, "expert id out of range");
  auto counts = Napi::Int32Array::New(info.Env(), E);
  auto offsets = Napi::Int32Array::New(info.Env(), E + 1);
  auto slot = Napi::Int32Array::New(info.Env(), M);
  ref::moe_align(ids, M, E, cap, counts.Data(), offsets.Data(), slot.Data());
  auto out = Napi::Object::New(info.Env());
  out.Set("counts", counts);
  out.Set("offsets", offsets);
  out.Set("slotRow", slot);
  return out;
}

// moePermute(x, slotRow, T, k, H, rows) -> Uint16Array [rows, H]
Napi::Value moe_permute(const Napi::CallbackInfo& info) {
  const int T = info[2].As<Napi::Number>(), k = info[3].As<Napi::Number>(), H = info[4].As<Napi::Number>(),
            rows = info[5].As<Napi::Number>();
  const int32_t* slot = array_data<int32_t>(info[1], "slotRow");
  for (int s = 0; s < T * k; ++s) DK_CHECK(slot[s] >= 0 && slot[s] < rows, "slot row out of range");
  auto xp = Napi::Uint16Array::New(info.Env(), size_t(rows) * H);
  ref::moe_permute(array_data<uint16_t>(info[0], "x"), slot, T, k, H, xp.Data());
  return xp;
}

// moeUnpermute(y, slotRow, weights, T, k, H) -> Uint16Array [T, H]
Napi::Value moe_unpermute(const Napi::CallbackInfo& info) {
  const int T = info[3].As<Napi::Number>(), k = info[4].As<Napi::Number>(), H = info[5].As<Napi::Number>();
  const int32_t* slot = array_data<int32_t>(info[1], "slotRow");
  const size_t rows = array_len(info[0]) / H;
  for (int s = 0; s < T * k; ++s) DK_CHECK(slot[s] >= 0 && size_t(slot[s]) < rows, "slot row out of range");
  auto out = Napi::Uint16Array::New(info.Env(), size_t(T) * H);
  ref::moe_unpermute(array_data<uint16_t>(info[0], "y"), slot, array_data<float>(info[2], "weights"), T, k, H,
                     out.Data());
  return out;
}

// siluMul(h, rows, I) -> Uint16Array [rows, I]
Napi::Value silu_mul(const Napi::CallbackInfo& info) {
  const int rows = info[1].As<Napi::Number>(), I = info[2].As<Napi::Number>();
  DK_CHECK(array_len(info[0]) == size_t(rows) * 2 * I, "h must be [rows, 2I]");
  auto act = Napi::Uint16Array::New(info.Env(), size_t(rows) * I);
  ref::silu_mul(array_data<uint16_t>(info[0], "h"), rows, I, act.Data());
  return act;
}

// quantizeInt8Rows(w, rows, K) -> { q, scales }
Napi::Value quantize_int8_rows(const Napi::CallbackInfo& info) {
  const int rows = info[1].As<Napi::Number>(), K = info[2].As<Napi::Number>();
  DK_CHECK(array_len(info[0]) == size_t(rows) * K, "w must be [rows, K]");
  auto q = Napi::Int8Array::New(info.Env(), size_t(rows) * K);
  auto s = Napi::Float32Array::New(info.Env(), rows);
  ref::quantize_int8_rows(array_data<uint16_t>(info[0], "w"), rows, K, q.Data(), s.Data());
  auto out = Napi::Object::New(info.Env());
  out.Set("q", q);
  out.Set("scales", s);
  return out;
}

}  // namespace

Napi::Object cpu_exports(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("groupedGemmBf16", Napi::Function::New<guarded<grouped_gemm_bf16>>(env));
  o.Set("groupedGemmW8a16", Napi::Function::New<guarded<grouped_gemm_w8a16>>(env));
  o.Set("routerTopk", Napi::Function::New<guarded<router_topk>>(env));
  o.Set("moeAlign", Napi::Function::New<guarded<moe_align>>(env));
  o.Set("moePermute", Napi::Function::New<guarded<moe_permute>>(env));
  o.Set("moeUnpermute", Napi::Function::New<guarded<moe_unpermute>>(env));
  o.Set("siluMul", Napi::Function::New<guarded<silu_mul>>(env));
  o.Set("quantizeInt8Rows", Napi::Function::New<guarded<quantize_int8_rows>>(env));
  return o;
}

}  // namespace dispatch::napi
