// Expert-parallel MoE layer (docs/expert-parallelism.md, "Serving through EP on GPUs"): one Model
// per GPU in one process, each rank holding a contiguous slice of every MoE layer's routed experts.
//
// Two ways to step (addon_ep.cpp): data-parallel attention (epStepRanks: each rank its own
// sequences, KV and tokens, possibly none: ep_idle_step) and replicated (epStep: every rank the
// same tokens, so each owner computes every routed row once per source rank; for checks). In each
// MoE layer every rank dispatches its tokens to the experts' owners (native-ep's p2p backend;
// the mode is the step's, the same on every rank: ep_begin_step), the owners run the grouped
// GEMMs over their own experts only, and combine returns each source its weighted sums. A step
// needs every rank. Low-latency decode steps (and idle steps) replay CUDA graphs keyed by the
// padded batch and the step's row bound (the p2p exchange keeps its epochs on the device, so it is
// graph safe); DISPATCH_CUDA_EP_GRAPHS=0 runs them eagerly.
//
// Legend: T tokens, k top-k, H hidden, E experts, Le local experts, I expert intermediate,
// N ranks, cap = max_tokens_ll * N (masked rows per local expert).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include "check.h"
#include "ep.h"
#include "fused_ops.h"
#include "gemm/grouped_gemm.h"
#include "model.h"
#include "moe/moe_ops.h"

namespace dcuda {

struct EpState {
  std::unique_ptr<dispatch::ep::EpBackend> nccl;  // bootstrap only (no NCCL call after setup)
  std::unique_ptr<dispatch::ep::EpBackend> p2p;
  EpOptions opt;
  int device = 0, first = 0, Le = 0;  // this rank's experts: [first, first + Le)
  size_t rows_ll = 0, rows_ht = 0;    // scratch rows for the two layouts
  bool step_ll = true;                // this step's exchange mode (ep_begin_step: the same on every rank)
  // The row bound of this step's exchange: the most tokens any rank has, rounded up to a power of
  // two (at most max_tokens_ll) in low-latency steps so decode graphs can be keyed by it.
  int step_max_tokens = 0;
  bf16 *g1 = nullptr, *a1 = nullptr;  // [rows, 2I] and [rows, I]
  ~EpState() {
    cudaSetDevice(device);
    cudaDeviceSynchronize();
    p2p.reset();
    nccl.reset();
    if (g1) cudaFree(g1);
    if (a1) cudaFree(a1);
  }
};

namespace {

__device__ __forceinline__ float ep_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The reference grouped GEMM over masked rows (tiny test models the kernels/ GEMMs refuse): the
// same reduction as ops.cu's grouped_gemm_ref_kernel, so a row's result does not depend on the layout.
__global__ void ep_masked_gemm_ref_kernel(const bf16* __restrict__ X, const bf16* __restrict__ W, bf16* __restrict__ Y,
                                          const int* __restrict__ counts, int cap, int N, int K) {
  const int e = blockIdx.z;
  const int n_rows = counts[e];
  const bf16* w = W + size_t(e) * N * K;
  const int lane = threadIdx.x & 31;
  for (int r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const size_t row = size_t(e) * cap + r;
    for (int n = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5); n < N; n += gridDim.y * (blockDim.x >> 5)) {
      float s = 0.f;
      for (int i = lane; i < K; i += 32) s += __bfloat162float(X[row * K + i]) * __bfloat162float(w[size_t(n) * K + i]);
      s = ep_warp_sum(s);
      if (lane == 0) Y[row * N + n] = __float2bfloat16(s);
    }
  }
}

// act = silu(gate) * up for the real rows only: masked (counts, cap) or contiguous (offsets; rows < offsets[Le]).
// Same arithmetic as ops.cu's silu_mul_bf16.
__global__ void ep_silu_mul_kernel(const bf16* __restrict__ gu, bf16* __restrict__ act, const int* __restrict__ counts,
                                   const int* __restrict__ offsets, int Le, int cap, int I) {
  const int row = blockIdx.x;
  if (counts) {
    if (row % cap >= counts[row / cap]) return;
  } else if (row >= offsets[Le]) {
    return;
  }
  for (int i = threadIdx.x; i < I; i += blockDim.x) {
    const float g = __bfloat162float(gu[size_t(row) * 2 * I + i]);
    const float u = __bfloat162float(gu[size_t(row) * 2 * I + I + i]);
    act[size_t(row) * I + i] = __float2bfloat16(g / (1.f + expf(-g)) * u);
  }
}

}  // namespace

int Model::ep_max_tokens_ht() const { return ep_ ? ep_->opt.max_tokens_ht : 0; }
int Model::ep_max_tokens_ll() const { return ep_ ? ep_->opt.max_tokens_ll : 0; }

void Model::ep_begin_step(bool low_latency, int max_rank_tokens) {
  DC_CHECK(ep_ != nullptr, "ep_begin_step needs expert parallelism (enable_ep)");
  DC_CHECK(max_rank_tokens >= 1, "an EP step needs tokens on at least one rank");
  DC_CHECK(!low_latency || max_rank_tokens <= ep_->opt.max_tokens_ll,
           "low-latency EP step with " + std::to_string(max_rank_tokens) + " tokens on one rank (max_tokens_ll " +
               std::to_string(ep_->opt.max_tokens_ll) + ")");
  DC_CHECK(max_rank_tokens <= ep_->opt.max_tokens_ht, "EP step of " + std::to_string(max_rank_tokens) +
                                                          " tokens on one rank exceeds max_tokens_ht " +
                                                          std::to_string(ep_->opt.max_tokens_ht));
  ep_->step_ll = low_latency;
  const int bound = low_latency ? pow2_at_least(max_rank_tokens, ep_->opt.max_tokens_ll) : max_rank_tokens;
  ep_->step_max_tokens = bound;
}

void Model::ep_idle_step() {
  DC_CHECK(ep_ != nullptr, "ep_idle_step needs expert parallelism (enable_ep)");
  DC_CUDA(cudaSetDevice(device_));
  auto body = [&] {
    for (int l = 0; l < cfg_.num_layers; ++l)
      if (cfg_.layers[l].moe) moe_layer_ep(l, 0, h_, hb_, nullptr);
  };
  if (!ep_graphable() || !replay(graph_key(0), body)) body();
  DC_CUDA(cudaStreamSynchronize(stream_));
}

void Model::set_graphs(int max_batch) {
  if (ep_) {
    static const bool off = [] {
      const char* v = std::getenv("DISPATCH_CUDA_EP_GRAPHS");
      return v && v[0] == '0';
    }();
    int cap = 1;
    while (cap * 2 <= ep_->opt.max_tokens_ll) cap *= 2;
    max_batch = off ? 0 : std::min(max_batch, cap);
  }
  if (max_batch != graph_max_batch_) clear_graphs();
  graph_max_batch_ = max_batch;
}

bool Model::ep_graphable() const { return ep_ && ep_->step_ll && graph_max_batch_ > 0; }

int Model::graph_key(int G) const { return ep_ ? G | (ep_->step_max_tokens << 16) : G; }

void Model::enable_ep(const EpOptions& o) {
  DC_CHECK(!ep_, "expert parallelism is already on for this model");
  DC_CHECK(o.num_ranks >= 1 && o.rank >= 0 && o.rank < o.num_ranks, "EP rank outside [0, num_ranks)");
  DC_CHECK(o.nccl_id != nullptr, "EP needs the NCCL unique id");
  DC_CHECK(o.max_tokens_ll >= 1 && o.max_tokens_ht >= o.max_tokens_ll, "EP needs 1 <= max_tokens_ll <= max_tokens_ht");
  DC_CHECK(!cfg_.int8_experts, "expert parallelism takes bf16 experts only (int8 experts: not built)");
  DC_CUDA(cudaSetDevice(device_));
  int E = 0, k = 0;
  for (const LayerConfig& c : cfg_.layers) {
    if (!c.moe) continue;
    DC_CHECK(E == 0 || (c.num_experts == E && c.top_k == k), "EP needs the same experts and top-k in every MoE layer");
    E = c.num_experts, k = c.top_k;
  }
  DC_CHECK(E > 0, "expert parallelism needs MoE layers");
  DC_CHECK(E >= o.num_ranks, "fewer experts than EP ranks");
  auto st = std::make_shared<EpState>();
  st->opt = o;
  st->device = device_;
  const int N = o.num_ranks;
  auto first_of = [&](int r) { return int((long long)r * E / N); };
  st->first = first_of(o.rank);
  st->Le = first_of(o.rank + 1) - st->first;
  // Keep this rank's slice of each layer's stacked experts ([E, 2I, H] / [E, H, I]); freed before
  // any exchange exists (cudaFree may wait on peers).
  const int H = cfg_.hidden;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerConfig& c = cfg_.layers[l];
    if (!c.moe) continue;
    LayerWeights& w = w_.layers[l];
    const size_t gu = size_t(2) * c.intermediate * H, dn = size_t(H) * c.intermediate;  // elements per expert
    const int gu_id = alloc_buf(st->Le * gu * 2), dn_id = alloc_buf(st->Le * dn * 2);
    DC_CUDA(cudaMemcpy(buf(gu_id), static_cast<const bf16*>(buf(w.gate_up)) + st->first * gu, st->Le * gu * 2, cudaMemcpyDeviceToDevice));
    DC_CUDA(cudaMemcpy(buf(dn_id), static_cast<const bf16*>(buf(w.down)) + st->first * dn, st->Le * dn * 2, cudaMemcpyDeviceToDevice));
    free_buf(w.gate_up, size_t(E) * gu * 2);
    free_buf(w.down, size_t(E) * dn * 2);
    w.gate_up = gu_id, w.down = dn_id;
  }
  dispatch::ep::EpConfig ec;
  ec.rank = o.rank, ec.num_ranks = N, ec.device = device_;
  ec.num_experts = E, ec.hidden = H, ec.top_k = k;
  ec.max_tokens_ht = o.max_tokens_ht, ec.max_tokens_ll = o.max_tokens_ll;
  ec.align = 1;
  for (int r = 0; r < N; ++r) {
    ec.placement.emplace_back();
    for (int e = first_of(r); e < first_of(r + 1); ++e) ec.placement.back().push_back(e);
  }
  st->nccl = dispatch::ep::createNcclBackend(ec, o.nccl_id);
  st->p2p = dispatch::ep::createP2pBackend(ec, *st->nccl);
  DC_CHECK(st->p2p->numLocalExperts() == st->Le, "p2p backend disagrees on the local expert count");
  // Scratch for the expert GEMMs: low-latency [Le, cap] rows; high-throughput at most N * T tokens
  // received, each expanded to min(k, Le) local rows (the backend's own bound, align 1).
  st->rows_ll = size_t(st->Le) * o.max_tokens_ll * N;
  st->rows_ht = size_t(N) * o.max_tokens_ht * std::min(k, st->Le);
  const size_t rows = std::max(st->rows_ll, st->rows_ht);
  DC_CUDA(cudaMalloc(&st->g1, rows * 2 * max_i_ * 2));
  DC_CUDA(cudaMalloc(&st->a1, rows * max_i_ * 2));
  DC_CUDA(cudaDeviceSynchronize());
  ep_ = st;
  graph_max_batch_ = 0;
  clear_graphs();
}

void Model::release_ep() {
  if (!ep_) return;
  DC_CUDA(cudaSetDevice(device_));
  DC_CUDA(cudaDeviceSynchronize());
  ep_->p2p.reset();
  ep_->nccl.reset();
}

void Model::ep_reserve(StepShape s) {
  DC_CUDA(cudaSetDevice(device_));
  if (s.T <= graph_max_batch_) {
    // a decode step runs padded to its graph's batch (enqueue): reserve that, so enqueue never
    // frees scratch inside a collective step
    const int g = pow2_at_least(s.T, graph_max_batch_);
    s = {std::max(s.T, g), std::max(s.S, g), std::max(s.R, g)};
  }
  ensure_capacity(s);
  DC_CUDA(cudaDeviceSynchronize());
}

bool Model::moe_layer_ep(int l, int T, float* h, bf16* hb, const float* post_norm) {
  const LayerConfig& c = cfg_.layers[l];
  const LayerWeights& w = w_.layers[l];
  EpState& ep = *ep_;
  DC_CHECK(ep.p2p != nullptr, "expert parallelism was released on this model");
  const int H = cfg_.hidden, E = c.num_experts, k = c.top_k, I = c.intermediate, Le = ep.Le, N = ep.opt.num_ranks;
  const int maxT = ep.step_max_tokens;  // the most tokens any rank sends this step (ep_begin_step)
  DC_CHECK(T <= maxT, "EP layer with " + std::to_string(T) + " tokens in a step planned for at most " + std::to_string(maxT));
  if (T == 0) {
    // an idle rank (ep_idle_step): no router; it only serves its experts to the peers
  } else if (post_norm) {
    norm_router(x_, T, H, post_norm, cfg_.rms_eps, static_cast<const float*>(buf(w.router)), E, router_logits_, h, hb,
                stream_);
  } else {
    linear_f32(h, T, H, static_cast<const float*>(buf(w.router)), E, router_logits_, stream_);
  }
  dispatch::RouterConfig rc;
  rc.num_experts = E, rc.top_k = k, rc.renormalize = c.norm_top_k;
  if (T > 0)
    dispatch::sm90_f32_router_topk(router_logits_, static_cast<const float*>(buf(w.router_bias)), T, rc, topk_ids_,
                                   topk_w_, stream_);
  mark("ep_router_topk");
  const void* wgu = buf(w.gate_up);  // [Le, 2I, H]
  const void* wd = buf(w.down);       // [Le, H, I]
  const bool fast = moe_kernels_take(c);
  // interleaved gate/up rows (bind's interleave_experts; the slice kept here is whole experts, so
  // it stays interleaved): the gate/up GEMM writes silu(gate) * up into ep.a1 itself
  const bool fuse = gate_up_fused(l);
  DC_CHECK(fast || !fuse, "interleaved gate/up rows need the kernels/ GEMM");
  if (ep.step_ll) {
    const dispatch::ep::LlRows r = ep.p2p->dispatchLl(hb, topk_ids_, T, stream_);
    mark("ep_dispatch_ll");
    const dispatch::ExpertRows rows{nullptr, r.counts, r.cap};
    // every source rank sends at most maxT tokens: rows per local expert <= maxT * N
    const int per_expert = std::min(r.cap, maxT * N);
    const int active = std::min(Le, maxT * k * N);
    auto gemm_masked = [&](const void* X, const void* W, void* Y, int Nout, int K, bool silu) {
      if (fast) {
        dispatch::sm90_bf16_grouped_gemm_masked(X, W, Y, rows, Le, Nout, K, per_expert, active, stream_, silu);
      } else {
        dim3 grid(std::min(per_expert, 64), std::min((Nout + 7) / 8, 64), Le);
        ep_masked_gemm_ref_kernel<<<grid, 256, 0, stream_>>>(static_cast<const bf16*>(X), static_cast<const bf16*>(W),
                                                             static_cast<bf16*>(Y), r.counts, r.cap, Nout, K);
        DC_LAUNCHED();
      }
    };
    gemm_masked(r.xs, wgu, fuse ? ep.a1 : ep.g1, 2 * I, H, fuse);
    if (!fuse) {
      ep_silu_mul_kernel<<<Le * r.cap, 256, 0, stream_>>>(ep.g1, ep.a1, r.counts, nullptr, Le, r.cap, I);
      DC_LAUNCHED();
    }
    gemm_masked(ep.a1, wd, r.ys, H, I, false);
    mark("ep_expert_gemms");
    ep.p2p->combineLl(topk_ids_, topk_w_, moe_out_, stream_);
    mark("ep_combine_ll");
  } else {
    DC_CHECK(T <= ep.opt.max_tokens_ht, "EP step of " + std::to_string(T) + " tokens exceeds max_tokens_ht");
    const dispatch::ep::HtRows r = ep.p2p->dispatchHt(hb, topk_ids_, topk_w_, T, stream_);
    mark("ep_dispatch_ht");
    DC_CHECK(size_t(r.max_rows) <= ep.rows_ht, "EP high-throughput rows exceed the scratch");
    const int M = r.max_rows;
    if (fast) {
      dispatch::sm90_bf16_grouped_gemm_contiguous(r.xs, wgu, fuse ? ep.a1 : ep.g1, r.offsets, M, Le, 2 * I, H, stream_,
                                                  fuse);
    } else {
      grouped_gemm_ref(static_cast<const bf16*>(r.xs), static_cast<const bf16*>(wgu), ep.g1, r.offsets, M, Le, 2 * I, H,
                       stream_);
    }
    if (M > 0 && !fuse) {
      ep_silu_mul_kernel<<<M, 256, 0, stream_>>>(ep.g1, ep.a1, nullptr, r.offsets, Le, 1, I);
      DC_LAUNCHED();
    }
    if (fast) {
      dispatch::sm90_bf16_grouped_gemm_contiguous(ep.a1, wd, r.ys, r.offsets, M, Le, H, I, stream_);
    } else {
      grouped_gemm_ref(ep.a1, static_cast<const bf16*>(wd), static_cast<bf16*>(r.ys), r.offsets, M, Le, H, I, stream_);
    }
    mark("ep_expert_gemms");
    ep.p2p->combineHt(moe_out_, stream_);
    mark("ep_combine_ht");
  }
  // the unfused tail of Model::moe_layer: shared expert on this rank's tokens, then x += routed (+ shared)
  if (T > 0) add_routed_and_shared(l, T, h, hb);
  return false;
}

}  // namespace dcuda
