// The whole MoE decoder's forward step on one GPU: weights, paged KV cache, scratch, and the
// step itself (model-server/src/model/moe-model.ts is the same loop over the op-level Backend;
// this one runs device-resident, so routing never leaves the GPU and a decode step can be one
// CUDA graph). docs/cuda-backend.md explains the split.
//
// Legend: T tokens in the step, S sequences, R rows that need logits, H hidden, D head dim,
// Hq/Hkv query/KV heads, E experts, k top-k, I expert intermediate, V vocabulary, B block size.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>
#include "moe/moe_ops.h"
#include "ops.h"
#include "sampling.h"
#include "file_upload.h"

namespace dcuda {

struct LayerConfig {
  bool moe = false;
  int dense_intermediate = 0;  // dense MLP width (moe == false)
  int num_experts = 0, top_k = 0, intermediate = 0;
  bool norm_top_k = true;
  int shared_intermediate = 0;  // 0 = no shared expert
  bool shared_gate = false;
};

struct ModelConfig {
  int num_layers = 0, hidden = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, vocab = 0;
  float rms_eps = 1e-6f;
  int qk_norm = 0;       // 0 none, 1 per head (Qwen3-MoE), 2 whole projection (OLMoE)
  float clip_qkv = 0.f;  // <= 0: none
  int window = 0;        // 0: full attention
  int max_context = 0;
  bool int8_experts = false;    // routed experts as int8 with per-row fp32 scales (weight-only)
  // one-token MoE block in one kernel (moe_block.h): -1 DISPATCH_CUDA_MOE_BLOCK decides (default off: slower than the chain on the H200), 0 off, 1 on
  int moe_block = -1;
  // one-token steps' gate|up routing itself (the kernels' moe_gate_up_self_routed): -1 DISPATCH_CUDA_SELF_ROUTE decides (default on), 0 off, 1 on
  int self_route = -1;
  std::vector<float> inv_freq;  // [D/2]
  std::vector<LayerConfig> layers;
};

// Weight ids refer to buffers the model owns (upload()); -1 = absent.
struct LayerWeights {
  int input_norm = -1, post_norm = -1, qkv = -1, qkv_bias = -1, o = -1, o_bias = -1, q_norm = -1, k_norm = -1;
  int gate_up = -1, down = -1;                  // dense MLP, or the routed experts [E, 2I, H] / [E, H, I]
  int router = -1;                              // fp32 [E, H]
  int router_bias = -1;                         // fp32 [E], added for selection only (benchmarks' skew)
  int shared_gate_up = -1, shared_down = -1, shared_gate = -1;
};

struct ModelWeights {
  int embed = -1, norm = -1, lm_head = -1;
  std::vector<LayerWeights> layers;
};

struct StepShape {
  int T = 0, S = 0, R = 0;
};

// The smallest power of two >= n, at most cap (decode graphs and EP exchange bounds are keyed by it).
inline int pow2_at_least(int n, int cap) {
  int g = 1;
  while (g < n && g < cap) g *= 2;
  return g < cap ? g : cap;
}

// Expert parallelism (model_ep.cu, docs/expert-parallelism.md): one Model per GPU, all in one
// process; the routed experts are split contiguously over the ranks. Each rank steps its own
// tokens (data-parallel attention: its own sequences and KV) or, for checks, every rank the same
// tokens; a rank with no tokens in a step joins every MoE layer's exchange (ep_idle_step).
struct EpState;
struct EpOptions {
  int rank = 0, num_ranks = 1;
  int max_tokens_ll = 128;   // steps of up to this many tokens use the low-latency exchange
  int max_tokens_ht = 4096;  // largest step (tokens) of the high-throughput exchange
  const void* nccl_id = nullptr;  // 128 bytes, the same on every rank (bootstraps the p2p backend)
};

class Model {
 public:
  explicit Model(ModelConfig cfg);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  // Copies host data to a new device buffer (bf16 or fp32); returns its id.
  int upload(const float* data, size_t n, bool as_bf16);
  // A device buffer of n values read from safetensors byte ranges (file_upload.h), bf16 or fp32.
  int upload_ranges(const std::vector<std::string>& files, const std::vector<FileRange>& ranges, size_t n,
                    bool as_bf16);
  // A device buffer of n values drawn uniformly from [-scale, scale] (seeded; benchmarks).
  int random(size_t n, float scale, uint64_t seed, bool as_bf16);
  // A device buffer of n copies of value (fp32 or bf16).
  int fill(size_t n, float value, bool as_bf16);
  void bind(ModelWeights w);
  size_t weight_bytes() const { return weight_bytes_; }

  void allocate_kv(int num_blocks, int block_size);
  int table_stride() const { return table_stride_; }
  size_t kv_bytes_per_block(int block_size) const;

  // Runs one step from host metadata packed as ids[T] pos[T] slot[T] tok_seq[T] rows[R]
  // tables[S * table_stride()], leaves R x V fp32 logits in a pinned host buffer and returns it.
  // Blocks the calling thread (the binding calls it off the event loop). step and step_sample are for callers that
  // run one step at a time (EP, checks): each takes a turn and releases it before returning.
  const float* step(const int32_t* meta, StepShape shape);
  // The same step, then one token per logits row sampled on the GPU (params [R]); returns the
  // R ids (and, in *logprobs, their raw log-probabilities) in pinned host buffers. Only R ids
  // and R floats cross PCIe.
  const int32_t* step_sample(const int32_t* meta, StepShape shape, const SampleParams* params, const float** logprobs);
  // step_sample, and also the logits of rows host_rows[0..n_host) (sampled on the host: penalties,
  // top-logprobs, speculative verification), compacted in that order into *host_logits [n_host, V].
  const int32_t* step_sample(const int32_t* meta, StepShape shape, const SampleParams* params, const float** logprobs,
                             const int32_t* host_rows, int n_host, const float** host_logits);
  // Steps in flight (model_steps.cu; docs/cuda-backend.md, "Overlapped decode steps"). The binding takes a turn per
  // step on the JS thread, in call order, runs the step on a worker thread (run_turn: enqueued in turn order, then
  // waits for its own event only) and releases the turn's slot once the outputs are copied out. Two steps may be in
  // flight: the second is enqueued behind the first while the first computes. chain (null, or one entry per token
  // of the step): chain[i] >= 0 makes token i the id sampled for row chain[i] of the previous sampled step, read on
  // the device, so a decode step can be launched before the host has seen the tokens it continues. params null: a
  // logits step (StepOut::logits, R x V); else sampled (ids, logprobs, and the host_rows' logits in host_logits).
  // penalties (sampled steps): n_pen (token, count) pairs that rows' pen_offset / pen_count index (SampleParams);
  // top_ids / top_logprobs ([R, kMaxTopLogprobs]) come back when some row has top_n > 0.
  struct StepOut {
    const float* logits = nullptr;
    const int32_t* ids = nullptr;
    const float* logprobs = nullptr;
    const float* host_logits = nullptr;
    const int32_t* top_ids = nullptr;
    const float* top_logprobs = nullptr;
    int slot = 0;
  };
  uint64_t take_turn();
  StepOut run_turn(uint64_t turn, const int32_t* meta, StepShape shape, const SampleParams* params,
                   const int32_t* host_rows, int n_host, const int32_t* chain, const int32_t* penalties = nullptr,
                   int n_pen = 0);
  void release_turn(int slot);
  // Copies KV blocks out/in: [layers, 2, n, B, Hkv, D] bf16 bytes.
  void export_kv(const int32_t* blocks, int n, uint16_t* out);
  void import_kv(const int32_t* blocks, int n, const uint16_t* in);

  // Runs one step eagerly with an event after every op group; returns (group, GPU ms) summed
  // over layers, in first-seen order. For finding where a step's time goes (benchmarks only).
  std::vector<std::pair<std::string, float>> profile(const int32_t* meta, StepShape shape);

  // Under EP: capped at the largest power of two <= max_tokens_ll (graphed steps are low-latency
  // ones), and 0 with DISPATCH_CUDA_EP_GRAPHS=0.
  void set_graphs(int max_batch);

  // Collective (every rank's thread calls it at once, after bind; allocate_kv before or after):
  // keeps only this rank's experts, builds the NCCL bootstrap and the p2p backend, turns graphs off.
  void enable_ep(const EpOptions& o);
  // Grows the step scratch for s (frees and allocates): call on every rank, and let every rank
  // return, before a collective step, so no cudaFree runs while a peer waits in an exchange.
  void ep_reserve(StepShape s);
  // Before a collective step, on every rank: the step's exchange mode (low-latency: every rank has
  // at most max_tokens_ll tokens) and the most tokens any rank has (sizes the masked GEMMs' rows).
  void ep_begin_step(bool low_latency, int max_rank_tokens);
  // A rank with no tokens this step: serves its experts to the peers in every MoE layer's
  // exchange (dispatch and combine with T = 0), in layer order, then waits for its stream.
  void ep_idle_step();
  int ep_max_tokens_ll() const;
  // Collective like enable_ep (every rank's thread at once: NCCL's communicator teardown may
  // wait for its peers): frees the exchange; the model cannot step afterwards (it holds a slice).
  void release_ep();
  bool ep_enabled() const { return ep_ != nullptr; }
  int ep_max_tokens_ht() const;
  int device() const { return device_; }
  int graphs_captured() const { return int(graphs_.size()); }

 private:
  void* buf(int id) const;
  void ensure_capacity(StepShape s);
  void launch(StepShape s, const int32_t* d_meta);
  // upload metadata (and the chained token ids), run the step (graph or eager)
  void enqueue(const int32_t* meta, StepShape s, const int32_t* chain = nullptr);
  StepShape run_shape(const int32_t* meta, StepShape s, bool* decode) const;  // the padded shape a step runs at
  bool fits(StepShape run) const;  // ensure_capacity(run) would not reallocate
  void chain_tokens(const int32_t* chain, int T);  // model_steps.cu
  void use_slot(int slot);         // points host_meta_, host_params_, host_sampled_, host_logprob_, host_tiles_ at a slot's
  int cur_slot_ = 0;
  void plan_flash_tiles(const int32_t* meta, StepShape run, bool decode);
  // post_norm given: the router kernel computes h/hb = rmsnorm(x_) itself (small steps).
  // Returns true when it left the next layer's input norm in hb_ (next_norm given, fused path).
  bool moe_layer(int l, int T, float* h, bf16* hb, const float* post_norm, const float* next_norm);
  void expert_chain(int l, int T, const bf16* hb, const dispatch::RouterConfig& rc, const float* router_bias);
  void expert_gemms_int8(int l, int T, int M);
  bool moe_layer_ep(int l, int T, float* h, bf16* hb, const float* post_norm);  // model_ep.cu
  void add_routed_and_shared(int l, int T, float* h, bf16* hb);  // x += routed + shared expert
  // One-token steps of a MoE layer with a transposed router (prepare_moe_block) run moe_block.cu's kernel from the o
  // projection to the next input norm; returns whether it left that norm in hb_.
  bool moe_block_takes(int l, int T) const;
  bool moe_block_layer(int l, const float* next_norm);
  void prepare_moe_block();
  std::vector<int> router_t_;  // per layer: the router transposed [H, E] (fp32 buffer id), -1: not taken
  void* moe_block_scratch_ = nullptr;
  std::shared_ptr<EpState> ep_;
  void clear_graphs();
  void mark(const char* name);  // profiling only: an event after the op group `name`
  std::vector<std::pair<const char*, cudaEvent_t>> marks_;
  bool profiling_ = false;
  cudaGraphExec_t capture(const std::function<void()>& body);
  bool replay(int key, const std::function<void()>& body);
  // Graph key of a decode step of padded batch G: G, and under EP the step's masked-row bucket
  // (the expert GEMMs' row bound baked into the graph); G = 0 is an EP rank's idle step.
  int graph_key(int G) const;
  bool ep_graphable() const;  // this EP step is low-latency and graphs are on

  ModelConfig cfg_;
  ModelWeights w_;
  std::vector<void*> bufs_;
  std::unique_ptr<UploadStaging> staging_;  // pinned staging for upload_ranges, freed at bind()
  size_t weight_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;

  // KV cache: per layer [blocks, B, Hkv, D] bf16 for K and V
  std::vector<bf16*> k_cache_, v_cache_;
  int num_blocks_ = 0, block_size_ = 0, table_stride_ = 0;

  // Scratch, sized for cap_ (T, S, R)
  StepShape cap_{};
  std::vector<void*> scratch_;
  float* rope_cs_ = nullptr;  // [T, D] rope_table, for gemm_qkv_post
  float *x_ = nullptr, *h_ = nullptr, *qkv_ = nullptr, *gu_ = nullptr, *shared_ = nullptr, *gate_ = nullptr;
  float *router_logits_ = nullptr, *topk_w_ = nullptr, *last_ = nullptr, *logits_ = nullptr;
  bf16 *hb_ = nullptr, *attn_ = nullptr, *act_ = nullptr, *xp_ = nullptr, *g1_ = nullptr, *a1_ = nullptr,
       *y1_ = nullptr, *moe_out_ = nullptr, *lastb_ = nullptr;
  int32_t *topk_ids_ = nullptr, *counts_ = nullptr, *offsets_ = nullptr, *slot_row_ = nullptr, *ws_ = nullptr,
          *meta_ = nullptr;
  // Pinned host staging per step slot (two steps in flight); host_meta_ ... host_logprob_ point at the slot of the
  // step being enqueued (host_tiles_ too). host_logits_ is single: the binding lets at most one step that
  // downloads logits be in flight.
  struct PinnedSlot {
    int32_t* meta = nullptr;
    SampleParams* params = nullptr;
    int32_t* sampled = nullptr;
    float* logprob = nullptr;
    int32_t* chain = nullptr;
    int32_t* tiles = nullptr;
    int32_t* top_ids = nullptr;
    float* top_logprobs = nullptr;
    int2* pen = nullptr;  // grown on demand (pen_cap pairs), apart from the step buffers
    size_t pen_cap = 0;
  };
  PinnedSlot slots_[2];
  cudaEvent_t step_done_[2] = {nullptr, nullptr};
  bool slot_busy_[2] = {false, false};
  std::mutex turn_mu_;
  std::condition_variable turn_cv_;
  uint64_t turns_taken_ = 0, turns_enqueued_ = 0;
  int last_sampled_rows_ = -1;  // rows of the last enqueued sampled step (its ids stay in sampled_); -1: none
  int32_t* chain_ = nullptr;    // device [cap_.T]
  int32_t* top_ids_ = nullptr;  // device [cap_.R, kMaxTopLogprobs]
  float* top_logprobs_ = nullptr;
  int2* pen_ = nullptr;  // device penalty pairs, pen_cap_ of them (grown on demand; freed by the destructor)
  size_t pen_cap_ = 0;
  // Uploads a sampled step's penalty pairs (growing the buffers) and checks every row's references into them.
  void stage_penalties(const SampleParams* params, StepShape s, const int32_t* pairs, int n_pen);
  int32_t* host_meta_ = nullptr;  // pinned
  float* host_logits_ = nullptr;  // pinned
  SampleParams* params_ = nullptr;
  int32_t* sampled_ = nullptr;
  float* sampled_logprob_ = nullptr;
  float* host_logprob_ = nullptr;  // pinned
  SampleParams* host_params_ = nullptr;  // pinned
  int32_t* host_sampled_ = nullptr;      // pinned
  size_t meta_cap_ = 0;
  int max_e_ = 1, max_k_ = 1, max_i_ = 1, max_dense_i_ = 1;

  // Decode graphs keyed by padded batch size
  int graph_max_batch_ = 0;
  std::map<int, cudaGraphExec_t> graphs_;
  std::set<int> warmed_;  // graph keys that ran once eagerly (captured on their next step)
  bool use_kernels_moe_ = true;
  int small_m_hint_ = 0;                // DISPATCH_CUDA_SMALL_M_HINT (0: small_m_rows_hint's rule)
  // int8 experts in steps of more than int8_small_m_max_ tokens on the kernels' W8A16 tensor-core GEMM
  // (DISPATCH_CUDA_INT8_WGMMA=0: the small-M kernel to 64 tokens and a per-layer bf16 dequantization above)
  bool int8_wgmma_ = true;
  int int8_small_m_max_ = 0;  // DISPATCH_CUDA_INT8_SMALL_M_MAX (0-16): steps this short keep the small-M kernel
  // bf16 experts (fused-SiLU layout) of one-token steps: gate|up routes itself instead of route_small + gate|up
  // (the config's self_route, else DISPATCH_CUDA_SELF_ROUTE, default on)
  bool self_route_ = true;
  bool int8_wgmma_takes(const LayerConfig& c) const {
    return int8_wgmma_ && use_kernels_moe_ && cfg_.hidden % 128 == 0 && c.intermediate % 128 == 0;
  }
  // SiLU fused into the routed experts' gate/up GEMM (DISPATCH_CUDA_FUSED_SILU=0: off): per MoE
  // layer, whether bind() interleaved its gate/up rows by 8 (interleave_experts) for fuse_silu.
  bool fused_silu_ = true;
  // DISPATCH_CUDA_SKIP_OPS (a cost probe, results garbage): bit i set = op group i of model.cu's
  // kSkippable is not launched in steps of <= 64 tokens.
  unsigned skip_ops_ = 0;
  std::vector<char> gate_up_interleaved_;
  bool gate_up_fused(int l) const { return l < int(gate_up_interleaved_.size()) && gate_up_interleaved_[l]; }
  // Whether layer c's routed-expert GEMMs are the kernels/ ones (their shape rules, not forced to
  // the reference): moe_layer, expert_gemms_int8 and moe_layer_ep all decide with this one rule.
  bool moe_kernels_take(const LayerConfig& c) const;
  void interleave_experts();
  bool flash_ = false;                  // tiled attention for eager steps (DISPATCH_CUDA_FLASH=0: off)
  int flash_min_tokens_ = 65;           // DISPATCH_CUDA_FLASH_MIN_TOKENS
  int32_t* tiles_ = nullptr;            // device [cap T, 2]
  int32_t* host_tiles_ = nullptr;       // pinned
  bool long_ctx_ = false;               // this decode step's attention is long-context (AttentionArgs::long_context)
  static constexpr int kLongContextGraph = 1 << 30;  // graph key bit of such steps
  FlashPlan flash_plan_{};              // num_tiles > 0: this step's attention is the tiled kernel (plan_attention_flash)
  // int8 experts (cfg_.int8_experts): per MoE layer, ids of q [E, N, K] int8 and scales [E, N]
  struct Int8Experts {
    int gate_up_q = -1, gate_up_s = -1, down_q = -1, down_s = -1;
  };
  std::vector<Int8Experts> int8_;
  bf16* dequant_ = nullptr;  // one layer's experts back in bf16, for steps above the small-M path
  size_t dequant_elems_ = 0;
  void quantize_experts();
  int alloc_buf(size_t bytes);
  void free_buf(int id, size_t bytes);
  int inv_freq_id_ = -1;
};

}  // namespace dcuda
