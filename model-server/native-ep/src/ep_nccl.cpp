// The NCCL backend of EpBackend: every exchange is one ncclGroupStart/End around an
// ncclSend and an ncclRecv per peer (self included: NCCL copies it locally), i.e. an
// all-to-all with per-peer sizes. High-throughput sizes come from a count exchange and one
// host sync per dispatch; low-latency sizes are fixed (capacity), so that path never syncs.
#include <algorithm>
#include <cuda_bf16.h>
#include <numeric>
#include "check.h"
#include "ep.h"
#include "ep_kernels.cuh"
#include "ep_ll_tokens.cuh"
#include "nccl_loader.h"
#include "placement_tables.h"

namespace dispatch::ep {
namespace {

template <typename T>
T* devAlloc(size_t n) {
  void* p = nullptr;
  EP_CUDA(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return static_cast<T*>(p);
}

class NcclBackend final : public EpBackend {
 public:
  NcclBackend(const EpConfig& c, const void* unique_id) : cfg_(c) {
    std::string why;
    api_ = loadNccl(&why);
    EP_CHECK(api_ != nullptr, why);
    N_ = c.num_ranks;
    E_ = c.num_experts;
    H_ = c.hidden;
    k_ = c.top_k;
    EP_CHECK(H_ % 8 == 0 && k_ >= 1 && k_ <= 32 && c.align >= 1, "H % 8 == 0, 1 <= k <= 32, align >= 1");
    EP_CUDA(cudaSetDevice(c.device));
    buildPlacement();
    ncclUniqueId id;
    std::copy_n(static_cast<const char*>(unique_id), NCCL_UNIQUE_ID_BYTES, id.internal);
    EP_NCCL(api_, commInitRank(&comm_, N_, id, c.rank));
    allocate();
  }

  ~NcclBackend() override {
    for (void* p : owned_) cudaFree(p);
    if (host_) cudaFreeHost(host_);
    if (comm_) api_->commDestroy(comm_);
  }

  const char* name() const override { return "nccl"; }

  HtRows dispatchHt(const void* x, const int32_t* ids, const float* w, int T, cudaStream_t s) override {
    EP_CHECK(T >= 0 && T <= cfg_.max_tokens_ht, "T exceeds max_tokens_ht");
    T_ = T;
    launchLayout(ids, T, k_, cfg_.rank, dp_, slot_rank_, in_rank_, per_rank_, s);
    launchSendPositions(in_rank_, T, N_, pos_, s);
    // Counts to every peer, and theirs to us, then one host sync for the payload sizes.
    EP_CUDA(cudaMemcpyAsync(h_send_cnt_, per_rank_, sizeof(int) * N_, cudaMemcpyDeviceToHost, s));
    group([&](int p) {
      EP_NCCL(api_, send(per_rank_ + p, 1, ncclInt32, p, comm_, s));
      EP_NCCL(api_, recv(recv_cnt_ + p, 1, ncclInt32, p, comm_, s));
    });
    EP_CUDA(cudaMemcpyAsync(h_recv_cnt_, recv_cnt_, sizeof(int) * N_, cudaMemcpyDeviceToHost, s));
    EP_CUDA(cudaStreamSynchronize(s));
    std::exclusive_scan(h_send_cnt_, h_send_cnt_ + N_, h_send_off_, 0);
    std::exclusive_scan(h_recv_cnt_, h_recv_cnt_ + N_, h_recv_off_, 0);
    R_ = h_recv_off_[N_ - 1] + h_recv_cnt_[N_ - 1];
    EP_CUDA(cudaMemcpyAsync(send_off_, h_send_off_, sizeof(int) * N_, cudaMemcpyHostToDevice, s));
    launchHtPack(x, ids, w, slot_rank_, pos_, send_off_, T, k_, H_, dp_, send_x_, send_le_, send_w_, s);
    group([&](int p) {
      const size_t so = h_send_off_[p], sc = h_send_cnt_[p], ro = h_recv_off_[p], rc = h_recv_cnt_[p];
      EP_NCCL(api_, send(bf(send_x_) + so * H_, sc * H_, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, send(send_le_ + so * k_, sc * k_, ncclInt32, p, comm_, s));
      EP_NCCL(api_, send(send_w_ + so * k_, sc * k_, ncclFloat32, p, comm_, s));
      EP_NCCL(api_, recv(bf(recv_x_) + ro * H_, rc * H_, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, recv(recv_le_ + ro * k_, rc * k_, ncclInt32, p, comm_, s));
      EP_NCCL(api_, recv(recv_w_ + ro * k_, rc * k_, ncclFloat32, p, comm_, s));
    });
    mark(probe_.dispatch_arrived, s);
    launchHtExpand(recv_x_, recv_le_, R_, k_, H_, Le_, cfg_.align, counts_, offsets_, row_of_, workspace_, xs_, s);
    return {xs_, ys_, offsets_, max_rows_, R_};
  }

  void combineHt(void* out, cudaStream_t s) override {
    launchHtReduce(ys_, row_of_, recv_le_, recv_w_, l2g_, R_, k_, H_, partial_, s);
    group([&](int p) {
      EP_NCCL(api_, send(bf(partial_) + size_t(h_recv_off_[p]) * H_, size_t(h_recv_cnt_[p]) * H_, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, recv(bf(back_) + size_t(h_send_off_[p]) * H_, size_t(h_send_cnt_[p]) * H_, ncclBfloat16, p, comm_, s));
    });
    mark(probe_.combine_arrived, s);
    launchHtSum(back_, pos_, send_off_, T_, N_, H_, out, s);
  }

  LlRows dispatchLl(const void* x, const int32_t* ids, int T, cudaStream_t s) override {
    // T is checked on the host only: the low-latency path never reads device data on the host.
    EP_CHECK(T >= 0 && T <= cfg_.max_tokens_ll, "T exceeds max_tokens_ll");
    T_ = T;
    const int maxT = cfg_.max_tokens_ll;
    if (cfg_.ll_wire_tokens) return dispatchLlTokens(x, ids, T, s);
    launchLayout(ids, T, k_, cfg_.rank, dp_, slot_rank_, in_rank_, per_rank_, s);
    launchLlPack(x, ids, slot_rank_, T, k_, H_, LeMax_, maxT, dp_, ll_send_x_, ll_send_cnt_, slot_pos_, s);
    const size_t region = size_t(LeMax_) * maxT * H_;
    group([&](int p) {
      EP_NCCL(api_, send(bf(ll_send_x_) + p * region, region, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, send(ll_send_cnt_ + p * LeMax_, LeMax_, ncclInt32, p, comm_, s));
      EP_NCCL(api_, recv(bf(ll_recv_x_) + p * region, region, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, recv(ll_recv_cnt_ + p * LeMax_, LeMax_, ncclInt32, p, comm_, s));
    });
    mark(probe_.dispatch_arrived, s);
    launchLlCompact(ll_recv_x_, ll_recv_cnt_, N_, Le_, LeMax_, maxT, H_, ll_xs_, ll_counts_, s);
    return {ll_xs_, ll_ys_, ll_counts_, N_ * maxT};
  }

  void combineLl(const int32_t* ids, const float* w, void* out, cudaStream_t s) override {
    const int maxT = cfg_.max_tokens_ll;
    if (cfg_.ll_wire_tokens) return combineLlTokens(ids, w, out, s);
    const size_t region = size_t(LeMax_) * maxT * H_;
    launchLlScatterBack(ll_ys_, ll_recv_cnt_, N_, Le_, LeMax_, maxT, H_, ll_send_x_, s);
    group([&](int p) {
      EP_NCCL(api_, send(bf(ll_send_x_) + p * region, region, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, recv(bf(ll_recv_x_) + p * region, region, ncclBfloat16, p, comm_, s));
    });
    mark(probe_.combine_arrived, s);
    launchLlReduce(ll_recv_x_, ids, w, slot_rank_, slot_pos_, T_, k_, H_, LeMax_, maxT, out, s);
  }

  std::vector<uint8_t> allGather(const std::vector<uint8_t>& mine) {
    const size_t n = mine.size();
    uint8_t* d = alloc<uint8_t>(n * (N_ + 1));
    EP_CUDA(cudaMemcpy(d, mine.data(), n, cudaMemcpyHostToDevice));
    group([&](int p) {
      EP_NCCL(api_, send(d, n, ncclUint8, p, comm_, nullptr));
      EP_NCCL(api_, recv(d + n * (p + 1), n, ncclUint8, p, comm_, nullptr));
    });
    std::vector<uint8_t> all(n * N_);
    EP_CUDA(cudaMemcpy(all.data(), d + n, n * N_, cudaMemcpyDeviceToHost));
    return all;
  }

  const int* localToGlobal() const override { return l2g_; }
  int numLocalExperts() const override { return Le_; }

 private:
  // Token-sized low-latency exchange (EpConfig::ll_wire_tokens, ep_ll_tokens.cuh).
  LlRows dispatchLlTokens(const void* x, const int32_t* ids, int T, cudaStream_t s) {
    const size_t maxT = cfg_.max_tokens_ll;
    launchLayout(ids, T, k_, cfg_.rank, dp_, slot_rank_, in_rank_, per_rank_, s);
    launchSendPositions(in_rank_, T, N_, pos_, s);
    launchHtPack(x, ids, nullptr, slot_rank_, pos_, llt_off_, T, k_, H_, dp_, llt_send_x_, llt_send_le_, nullptr, s);
    group([&](int p) {
      EP_NCCL(api_, send(bf(llt_send_x_) + p * maxT * H_, maxT * H_, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, send(llt_send_le_ + p * maxT * k_, maxT * k_, ncclInt32, p, comm_, s));
      EP_NCCL(api_, send(per_rank_ + p, 1, ncclInt32, p, comm_, s));
      EP_NCCL(api_, recv(bf(llt_recv_x_) + p * maxT * H_, maxT * H_, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, recv(llt_recv_le_ + p * maxT * k_, maxT * k_, ncclInt32, p, comm_, s));
      EP_NCCL(api_, recv(llt_recv_n_ + p, 1, ncclInt32, p, comm_, s));
    });
    mark(probe_.dispatch_arrived, s);
    launchLlExpandTokens(llt_recv_x_, llt_recv_le_, llt_recv_n_, N_, int(maxT), k_, H_, Le_, ll_xs_, ll_counts_, llt_row_src_, s);
    return {ll_xs_, ll_ys_, ll_counts_, N_ * int(maxT)};
  }

  void combineLlTokens(const int32_t* ids, const float* w, void* out, cudaStream_t s) {
    const size_t maxT = cfg_.max_tokens_ll, region = maxT * k_ * H_;
    launchLlReturnTokens(ll_ys_, ll_counts_, llt_row_src_, N_, int(maxT), k_, H_, Le_, llt_ret_, s);
    group([&](int p) {
      EP_NCCL(api_, send(bf(llt_ret_) + p * region, region, ncclBfloat16, p, comm_, s));
      EP_NCCL(api_, recv(bf(llt_back_) + p * region, region, ncclBfloat16, p, comm_, s));
    });
    mark(probe_.combine_arrived, s);
    launchLlReduceTokens(llt_back_, ids, w, slot_rank_, pos_, T_, N_, int(maxT), k_, H_, out, s);
  }

  template <typename F>
  void group(F&& per_peer) {
    EP_NCCL(api_, groupStart());
    for (int p = 0; p < N_; ++p) per_peer(p);
    EP_NCCL(api_, groupEnd());
  }
  static __nv_bfloat16* bf(void* p) { return static_cast<__nv_bfloat16*>(p); }

  template <typename T>
  T* alloc(size_t n) {
    T* p = devAlloc<T>(n);
    owned_.push_back(p);
    return p;
  }

  void buildPlacement() {
    const PlacementTables tb = placementTables(cfg_);
    const std::vector<int>&rep = tb.rep, &num_rep = tb.num_rep, &local_index = tb.local_index;
    const int max_rep = tb.max_rep;
    LeMax_ = tb.le_max;
    const auto& mine = cfg_.placement[cfg_.rank];
    Le_ = int(mine.size());
    int* d_rep = alloc<int>(rep.size());
    int* d_num = alloc<int>(num_rep.size());
    int* d_li = alloc<int>(local_index.size());
    l2g_ = alloc<int>(Le_);
    EP_CUDA(cudaMemcpy(d_rep, rep.data(), rep.size() * sizeof(int), cudaMemcpyHostToDevice));
    EP_CUDA(cudaMemcpy(d_num, num_rep.data(), num_rep.size() * sizeof(int), cudaMemcpyHostToDevice));
    EP_CUDA(cudaMemcpy(d_li, local_index.data(), local_index.size() * sizeof(int), cudaMemcpyHostToDevice));
    if (Le_ > 0) EP_CUDA(cudaMemcpy(l2g_, mine.data(), Le_ * sizeof(int), cudaMemcpyHostToDevice));
    dp_ = {d_rep, d_num, d_li, max_rep, E_, N_};
  }

  void allocate() {
    const size_t Tm = std::max(cfg_.max_tokens_ht, cfg_.max_tokens_ll);
    const size_t Th = cfg_.max_tokens_ht;
    const size_t sendRows = Th * std::min(N_, k_);  // a token goes to at most min(N, k) ranks
    const size_t recvRows = Th * N_;                // each peer sends a token at most once
    max_rows_ = int(recvRows * std::min(k_, std::max(Le_, 1)) + size_t(Le_) * (cfg_.align - 1));
    slot_rank_ = alloc<int>(Tm * k_);
    in_rank_ = alloc<uint8_t>(Tm * N_);
    per_rank_ = alloc<int>(N_);
    pos_ = alloc<int>(Tm * N_);
    send_off_ = alloc<int>(N_);
    recv_cnt_ = alloc<int>(N_);
    send_x_ = alloc<__nv_bfloat16>(sendRows * H_);
    send_le_ = alloc<int>(sendRows * k_);
    send_w_ = alloc<float>(sendRows * k_);
    recv_x_ = alloc<__nv_bfloat16>(recvRows * H_);
    recv_le_ = alloc<int>(recvRows * k_);
    recv_w_ = alloc<float>(recvRows * k_);
    counts_ = alloc<int>(Le_);
    offsets_ = alloc<int>(Le_ + 1);
    workspace_ = alloc<int>(Le_);
    row_of_ = alloc<int>(recvRows * k_);
    xs_ = alloc<__nv_bfloat16>(size_t(max_rows_) * H_);
    ys_ = alloc<__nv_bfloat16>(size_t(max_rows_) * H_);
    partial_ = alloc<__nv_bfloat16>(recvRows * H_);
    back_ = alloc<__nv_bfloat16>(sendRows * H_);
    const size_t maxT = cfg_.max_tokens_ll, region = size_t(LeMax_) * maxT * H_;
    ll_send_x_ = alloc<__nv_bfloat16>(N_ * region);
    ll_recv_x_ = alloc<__nv_bfloat16>(N_ * region);
    ll_send_cnt_ = alloc<int>(size_t(N_) * LeMax_);
    ll_recv_cnt_ = alloc<int>(size_t(N_) * LeMax_);
    slot_pos_ = alloc<int>(maxT * k_);
    ll_xs_ = alloc<__nv_bfloat16>(size_t(Le_) * N_ * maxT * H_);
    ll_ys_ = alloc<__nv_bfloat16>(size_t(Le_) * N_ * maxT * H_);
    ll_counts_ = alloc<int>(Le_);
    if (cfg_.ll_wire_tokens) {
      llt_send_x_ = alloc<__nv_bfloat16>(N_ * maxT * H_);
      llt_recv_x_ = alloc<__nv_bfloat16>(N_ * maxT * H_);
      llt_send_le_ = alloc<int>(N_ * maxT * k_);
      llt_recv_le_ = alloc<int>(N_ * maxT * k_);
      llt_recv_n_ = alloc<int>(N_);
      llt_row_src_ = alloc<int>(size_t(Le_) * N_ * maxT);
      llt_ret_ = alloc<__nv_bfloat16>(N_ * maxT * k_ * H_);
      llt_back_ = alloc<__nv_bfloat16>(N_ * maxT * k_ * H_);
      llt_off_ = alloc<int>(N_);
      std::vector<int> off(N_);
      for (int p = 0; p < N_; ++p) off[p] = p * int(maxT);
      EP_CUDA(cudaMemcpy(llt_off_, off.data(), sizeof(int) * N_, cudaMemcpyHostToDevice));
    }
    EP_CUDA(cudaMallocHost(&host_, sizeof(int) * 4 * N_));
    h_send_cnt_ = static_cast<int*>(host_);
    h_recv_cnt_ = h_send_cnt_ + N_;
    h_send_off_ = h_recv_cnt_ + N_;
    h_recv_off_ = h_send_off_ + N_;
  }

  EpConfig cfg_;
  const NcclApi* api_ = nullptr;
  ncclComm_t comm_ = nullptr;
  int N_ = 1, E_ = 0, H_ = 0, k_ = 0, Le_ = 0, LeMax_ = 0, T_ = 0, R_ = 0, max_rows_ = 0;
  DevPlacement dp_{};
  std::vector<void*> owned_;
  void* host_ = nullptr;
  int *h_send_cnt_ = nullptr, *h_recv_cnt_ = nullptr, *h_send_off_ = nullptr, *h_recv_off_ = nullptr;
  int *slot_rank_, *per_rank_, *pos_, *send_off_, *recv_cnt_, *send_le_, *recv_le_, *counts_, *offsets_, *workspace_, *row_of_;
  uint8_t* in_rank_;
  float *send_w_, *recv_w_;
  void *send_x_, *recv_x_, *xs_, *ys_, *partial_, *back_;
  void *ll_send_x_, *ll_recv_x_, *ll_xs_, *ll_ys_;
  int *ll_send_cnt_, *ll_recv_cnt_, *slot_pos_, *ll_counts_;
  void *llt_send_x_ = nullptr, *llt_recv_x_ = nullptr, *llt_ret_ = nullptr, *llt_back_ = nullptr;
  int *llt_send_le_ = nullptr, *llt_recv_le_ = nullptr, *llt_recv_n_ = nullptr, *llt_row_src_ = nullptr, *llt_off_ = nullptr;
  int* l2g_ = nullptr;
};

}  // namespace

std::unique_ptr<EpBackend> createNcclBackend(const EpConfig& cfg, const void* unique_id) {
  return std::make_unique<NcclBackend>(cfg, unique_id);
}

std::vector<uint8_t> allGatherBytes(EpBackend& b, const std::vector<uint8_t>& mine) {
  auto* nccl = dynamic_cast<NcclBackend*>(&b);
  EP_CHECK(nccl != nullptr, "allGatherBytes needs the NCCL backend");
  return nccl->allGather(mine);
}

std::vector<uint8_t> ncclUniqueIdBytes() {
  std::string why;
  const NcclApi* api = loadNccl(&why);
  EP_CHECK(api != nullptr, why);
  ncclUniqueId id;
  EP_NCCL(api, getUniqueId(&id));
  return std::vector<uint8_t>(id.internal, id.internal + NCCL_UNIQUE_ID_BYTES);
}

int ncclVersionOrZero(std::string* why) {
  const NcclApi* api = loadNccl(why);
  int v = 0;
  if (api && api->getVersion(&v) != ncclSuccess) v = 0;
  return v;
}

}  // namespace dispatch::ep
