// Which kernel a launch would take, exposed to JS without a GPU (pure host logic: the tests pin the measured
// rules, docs/kernels.md "Session 8").
#include "napi_util.h"
#include "../gemm/grouped_gemm.h"

namespace dispatch::napi {
namespace {

// moeBf16Path({T, M, E, N, K, sms, aligned?, swapab?}) -> { path: "small_m" | "swapab" | "contiguous", tokenTile }
// (tokenTile: the swap-AB kernel's token tile, 0 on the other paths)
Napi::Value moe_bf16_path_js(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsObject()) throw KernelError("moeBf16Path takes an options object");
  const Napi::Object o = info[0].As<Napi::Object>();
  const int T = num(o, "T"), M = num(o, "M"), E = num(o, "E"), N = num(o, "N"), K = num(o, "K"), sms = num(o, "sms");
  DK_CHECK(T > 0 && M >= T && E > 0 && N > 0 && K > 0 && sms > 0,
           "moeBf16Path: T, M >= T, E, N, K and sms must be positive");
  const MoeBf16Path p = moe_bf16_path(T, M, E, N, K, sms, num(o, "aligned", 1) != 0, num(o, "swapab", 1) != 0);
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("path", p == MoeBf16Path::kSwapAb ? "swapab" : p == MoeBf16Path::kSmallM ? "small_m" : "contiguous");
  out.Set("tokenTile", p == MoeBf16Path::kSwapAb ? bf16_swapab_token_tile(moe_bf16_swapab_hint(T, M, E)) : 0);
  return out;
}

// w8a16Launch({rowsHint, M, E, N, sms}) -> { tokenTile, ctasPerSm }: what sm90_w8a16_grouped_gemm_contiguous runs
// with (without DK_W8A16_TOKEN_TILE / DK_W8A16_CTAS_PER_SM)
Napi::Value w8a16_launch_js(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsObject()) throw KernelError("w8a16Launch takes an options object");
  const Napi::Object o = info[0].As<Napi::Object>();
  const int hint = num(o, "rowsHint"), M = num(o, "M"), E = num(o, "E"), N = num(o, "N"), sms = num(o, "sms");
  DK_CHECK(hint > 0 && M > 0 && E > 0 && N > 0 && sms > 0, "w8a16Launch: rowsHint, M, E, N and sms must be positive");
  const int tile = w8a16_wgmma_token_tile(hint);
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("tokenTile", tile);
  out.Set("ctasPerSm", w8a16_wgmma_ctas_per_sm(tile, M, E, N, sms));
  return out;
}

// swapabSplit({tokenTile, M, E, N, K, sms, int8?}) -> { items, split }: the bound on the swap-AB kernels' work items
// and the cluster size that splits K (1 = no split; token tiles above 16 never split)
Napi::Value swapab_split_js(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsObject()) throw KernelError("swapabSplit takes an options object");
  const Napi::Object o = info[0].As<Napi::Object>();
  const int tile = num(o, "tokenTile"), M = num(o, "M"), E = num(o, "E"), N = num(o, "N"), K = num(o, "K"),
            sms = num(o, "sms");
  DK_CHECK(tile > 0 && M > 0 && E > 0 && N > 0 && K > 0 && sms > 0,
           "swapabSplit: tokenTile, M, E, N, K and sms must be positive");
  const int64_t items = swapab_items_tight(tile, M, E, N);
  const int k_blocks = K / (num(o, "int8", 0) != 0 ? 128 : 64);
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("items", double(items));
  out.Set("split", swapab_split_k(tile, items, k_blocks, sms));
  return out;
}

}  // namespace

Napi::Object paths_exports(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("moeBf16Path", Napi::Function::New<guarded<moe_bf16_path_js>>(env));
  o.Set("w8a16Launch", Napi::Function::New<guarded<w8a16_launch_js>>(env));
  o.Set("swapabSplit", Napi::Function::New<guarded<swapab_split_js>>(env));
  return o;
}

}  // namespace dispatch::napi
