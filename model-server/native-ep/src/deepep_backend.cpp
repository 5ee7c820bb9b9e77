// The DeepEP backend of EpBackend, built as a plugin (libdispatch_ep_deepep.so) only where
// DeepEP's C++ headers (csrc/deep_ep.hpp), libtorch and pybind11 are found, and loaded by the
// addon at run time only when asked for and present. Written against deep_ep::Buffer's
// interface (DeepEP's README and csrc/deep_ep.hpp); NEVER COMPILED NOR RUN in the session that
// wrote it (no DeepEP on these machines): see docs/expert-parallelism.md.
//
// What DeepEP serves here: even contiguous placement (E % N == 0, expert e on rank e / (E/N),
// no replicas), intranode (N <= 8, NVLink). Anything else returns nullptr with the reason and
// the addon keeps the NCCL backend.
//   high-throughput: get_dispatch_layout + intranode_dispatch (tokens once per rank, bf16) ->
//     our expansion into aligned per-expert rows; our per-token reduction -> intranode_combine.
//   low-latency: low_latency_dispatch (bf16, no FP8) gives [Le, N*maxT, H] + counts [Le] (the
//     masked layout, as ours) -> the caller's GEMMs -> low_latency_combine with the weights.
// DeepEP's topk_idx is int64 (its topk_idx_t): ids are widened on the device.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <pybind11/embed.h>
#include <torch/torch.h>
#include <deep_ep.hpp>
#include <cuda_bf16.h>
#include "check.h"
#include "ep.h"
#include "ep_kernels.cuh"

namespace dispatch::ep {
namespace {

namespace py = pybind11;

class DeepEpBackend final : public EpBackend {
 public:
  DeepEpBackend(const EpConfig& c, EpBackend& nccl)
      : cfg_(c), Le_(c.num_experts / c.num_ranks),
        // 20 SMs and (6, 256, 6, 128) chunk sizes: DeepEP's defaults for intranode runs; tune on the H200s.
        config_(20, 6, 256, 6, 128) {
    if (!Py_IsInitialized()) py::initialize_interpreter();  // Buffer's handles are Python bytearrays
    py::gil_scoped_acquire gil;
    const int64_t nvl = int64_t(config_.get_nvl_buffer_size_hint(size_t(c.hidden) * 2, c.num_ranks));
    const int64_t rdma = int64_t(deep_ep::get_low_latency_rdma_size_hint(c.max_tokens_ll, c.hidden, c.num_ranks, c.num_experts));
    buffer_ = std::make_unique<deep_ep::Buffer>(c.rank, c.num_ranks, nvl, rdma, /*low_latency_mode=*/true, /*explicitly_destroy=*/true);
    // Exchange device ids, IPC handles and (for the low-latency path) rank 0's NVSHMEM id.
    const int dev = buffer_->get_local_device_id();
    std::vector<uint8_t> mine(sizeof(int));
    std::memcpy(mine.data(), &dev, sizeof(int));
    const auto devs = allGatherBytes(nccl, mine);
    std::vector<int> device_ids(c.num_ranks);
    std::memcpy(device_ids.data(), devs.data(), devs.size());
    const std::string ipc = std::string(py::bytearray(buffer_->get_local_ipc_handle()));
    const auto all_ipc = allGatherBytes(nccl, std::vector<uint8_t>(ipc.begin(), ipc.end()));
    std::vector<std::optional<py::bytearray>> handles;
    for (int r = 0; r < c.num_ranks; ++r)
      handles.emplace_back(py::bytearray(reinterpret_cast<const char*>(all_ipc.data()) + r * ipc.size(), ipc.size()));
    // Rank 0's NVSHMEM unique id (the low-latency path), length-prefixed in a fixed-size all-gather.
    std::string root;
    if (c.rank == 0) root = std::string(py::bytearray(buffer_->get_local_nvshmem_unique_id()));
    EP_CHECK(root.size() <= 252, "NVSHMEM unique id larger than expected");
    std::vector<uint8_t> rb(256, 0);
    const int len = int(root.size());
    std::memcpy(rb.data(), &len, 4);
    std::memcpy(rb.data() + 4, root.data(), root.size());
    const auto all_root = allGatherBytes(nccl, rb);  // rank 0's slice comes first
    int len0 = 0;
    std::memcpy(&len0, all_root.data(), 4);
    std::optional<py::bytearray> root_id(py::bytearray(reinterpret_cast<const char*>(all_root.data()) + 4, len0));
    buffer_->sync(device_ids, handles, root_id);
    EP_CHECK(buffer_->is_available(), "DeepEP buffer did not become available after sync");
    // Our buffers for the expansion and the reductions (same sizes as the NCCL backend's).
    const auto opts = torch::TensorOptions().device(torch::kCUDA, c.device);
    const int64_t recv_rows = int64_t(c.max_tokens_ht) * c.num_ranks;
    max_rows_ = int(recv_rows * std::min(c.top_k, std::max(Le_, 1)) + int64_t(Le_) * (c.align - 1));
    xs_ = torch::empty({max_rows_, c.hidden}, opts.dtype(torch::kBFloat16));
    ys_ = torch::empty({max_rows_, c.hidden}, opts.dtype(torch::kBFloat16));
    counts_ = torch::empty({Le_}, opts.dtype(torch::kInt32));
    offsets_ = torch::empty({Le_ + 1}, opts.dtype(torch::kInt32));
    workspace_ = torch::empty({Le_}, opts.dtype(torch::kInt32));
    row_of_ = torch::empty({recv_rows * c.top_k}, opts.dtype(torch::kInt32));
    ll_ys_ = torch::empty({Le_, int64_t(c.num_ranks) * c.max_tokens_ll, c.hidden}, opts.dtype(torch::kBFloat16));
    std::vector<int> l2g(Le_);
    for (int i = 0; i < Le_; ++i) l2g[i] = c.rank * Le_ + i;
    l2g_ = torch::from_blob(l2g.data(), {Le_}, torch::kInt32).to(opts.dtype(torch::kInt32));
  }

  ~DeepEpBackend() override {
    py::gil_scoped_acquire gil;
    if (buffer_) buffer_->destroy();
  }

  const char* name() const override { return "deepep"; }
  const int* localToGlobal() const override { return l2g_.data_ptr<int>(); }
  int numLocalExperts() const override { return Le_; }

  HtRows dispatchHt(const void* x, const int32_t* ids, const float* w, int T, cudaStream_t s) override {
    StreamGuard g(s, cfg_.device);
    T_ = T;
    auto xt = wrap(x, {T, cfg_.hidden}, torch::kBFloat16);
    topk_ = wrap(ids, {T, cfg_.top_k}, torch::kInt32).to(torch::kInt64);
    auto wt = wrap(w, {T, cfg_.top_k}, torch::kFloat32);
    std::optional<deep_ep::EventHandle> none;
    auto [per_rank, per_rdma, per_expert, in_rank, ev0] = buffer_->get_dispatch_layout(topk_, cfg_.num_experts, none, false, false);
    auto r = buffer_->intranode_dispatch(xt, std::nullopt, topk_, wt, per_rank, in_rank, per_expert, 0, std::nullopt, std::nullopt,
                                         cfg_.align, 0, config_, none, false, false);
    recv_x_ = std::get<0>(r);
    recv_le_ = std::get<2>(r).value().to(torch::kInt32);  // local expert ids, -1 elsewhere
    recv_w_ = std::get<3>(r).value();
    rank_prefix_ = std::get<5>(r);
    recv_channel_prefix_ = std::get<7>(r);
    recv_src_idx_ = std::get<8>(r);
    send_head_ = std::get<9>(r);
    R_ = int(recv_x_.size(0));
    launchHtExpand(recv_x_.data_ptr(), recv_le_.data_ptr<int>(), R_, cfg_.top_k, cfg_.hidden, Le_, cfg_.align, counts_.data_ptr<int>(),
                   offsets_.data_ptr<int>(), row_of_.data_ptr<int>(), workspace_.data_ptr<int>(), xs_.data_ptr(), s);
    return {xs_.data_ptr(), ys_.data_ptr(), offsets_.data_ptr<int>(), max_rows_, R_};
  }

  void combineHt(void* out, cudaStream_t s) override {
    StreamGuard g(s, cfg_.device);
    auto partial = torch::empty({R_, cfg_.hidden}, recv_x_.options());
    launchHtReduce(ys_.data_ptr(), row_of_.data_ptr<int>(), recv_le_.data_ptr<int>(), recv_w_.data_ptr<float>(), l2g_.data_ptr<int>(), R_,
                   cfg_.top_k, cfg_.hidden, partial.data_ptr(), s);
    std::optional<deep_ep::EventHandle> none;
    auto r = buffer_->intranode_combine(partial, std::nullopt, std::nullopt, std::nullopt, recv_src_idx_, rank_prefix_, recv_channel_prefix_,
                                        send_head_, config_, none, false, false);
    EP_CUDA(cudaMemcpyAsync(out, std::get<0>(r).data_ptr(), size_t(T_) * cfg_.hidden * 2, cudaMemcpyDeviceToDevice, s));
  }

  LlRows dispatchLl(const void* x, const int32_t* ids, int T, cudaStream_t s) override {
    StreamGuard g(s, cfg_.device);
    T_ = T;
    topk_ = wrap(ids, {T, cfg_.top_k}, torch::kInt32).to(torch::kInt64);
    auto r = buffer_->low_latency_dispatch(wrap(x, {T, cfg_.hidden}, torch::kBFloat16), topk_, std::nullopt, std::nullopt, cfg_.max_tokens_ll,
                                           cfg_.num_experts, /*use_fp8=*/false, false, false, /*async=*/false, /*return_recv_hook=*/false);
    ll_x_ = std::get<0>(r);
    ll_count_ = std::get<2>(r);
    src_info_ = std::get<3>(r);
    layout_range_ = std::get<4>(r);
    return {ll_x_.data_ptr(), ll_ys_.data_ptr(), ll_count_.data_ptr<int>(), int(ll_x_.size(1))};
  }

  void combineLl(const int32_t*, const float* w, void* out, cudaStream_t s) override {
    StreamGuard g(s, cfg_.device);
    auto outT = wrap(out, {T_, cfg_.hidden}, torch::kBFloat16);
    buffer_->low_latency_combine(ll_ys_, topk_, wrap(w, {T_, cfg_.top_k}, torch::kFloat32), src_info_, layout_range_, std::nullopt,
                                 cfg_.max_tokens_ll, cfg_.num_experts, false, false, false, false, outT);
  }

 private:
  // DeepEP launches on the current PyTorch stream: make it ours for the call.
  struct StreamGuard {
    c10::cuda::CUDAStreamGuard guard;
    StreamGuard(cudaStream_t s, int dev) : guard(c10::cuda::getStreamFromExternal(s, dev)) {}
  };
  torch::Tensor wrap(const void* p, std::vector<int64_t> shape, torch::ScalarType t) const {
    return torch::from_blob(const_cast<void*>(p), shape, torch::TensorOptions().dtype(t).device(torch::kCUDA, cfg_.device));
  }

  EpConfig cfg_;
  int Le_;
  deep_ep::Config config_;
  std::unique_ptr<deep_ep::Buffer> buffer_;
  int T_ = 0, R_ = 0, max_rows_ = 0;
  torch::Tensor xs_, ys_, counts_, offsets_, workspace_, row_of_, ll_ys_, l2g_;
  torch::Tensor topk_, recv_x_, recv_le_, recv_w_, rank_prefix_, recv_channel_prefix_, recv_src_idx_, send_head_;
  torch::Tensor ll_x_, ll_count_, src_info_, layout_range_;
};

}  // namespace
}  // namespace dispatch::ep

extern "C" dispatch::ep::EpBackend* dispatch_ep_create_deepep(const dispatch::ep::EpConfig& c, dispatch::ep::EpBackend& nccl, std::string* why) {
  const int N = c.num_ranks;
  if (N > 8 || c.num_experts % N != 0) {
    *why = "DeepEP here serves intranode groups (N <= 8) with E % N == 0";
    return nullptr;
  }
  const int Le = c.num_experts / N;
  for (int r = 0; r < N; ++r) {
    const auto& l = c.placement[r];
    if (int(l.size()) != Le) { *why = "DeepEP needs the even contiguous placement"; return nullptr; }
    for (int i = 0; i < Le; ++i)
      if (l[i] != r * Le + i) { *why = "DeepEP needs the even contiguous placement (no replicas)"; return nullptr; }
  }
  try {
    return new dispatch::ep::DeepEpBackend(c, nccl);
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}
