// The NVLink peer-write backend of EpBackend, for ranks on one host whose GPUs reach each other
// by peer access (NVLink). Each rank allocates one symmetric buffer (ep_p2p_kernels.cuh); the
// ranks swap its address (one process driving several GPUs: cudaDeviceEnablePeerAccess) or its
// cudaIpc handle (one process per GPU) through an NCCL backend's allGatherBytes, once. After
// that no NCCL call is made: kernels store rows straight into the receivers' buffers and raise
// flags, so only real rows cross NVLink and low-latency mode has no host sync (graph capturable).
// High-throughput dispatch syncs the host once, at its end, for HtRows::num_recv_tokens.
// Low-latency completion: fused waits by default (ep_p2p_kernels.cuh); DISPATCH_EP_P2P_FUSED_WAIT=0
// selects the separate wait kernels as first measured (every rank must choose the same).
#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include "check.h"
#include "ep.h"
#include "ep_kernels.cuh"
#include "ep_p2p_kernels.cuh"
#include "placement_tables.h"

namespace dispatch::ep {
namespace {

// Identifies this process among the ranks (pids can repeat across containers).
uint64_t processToken() {
  static const uint64_t token = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(getpid());
  }();
  return token;
}

struct PeerCard {
  uint64_t process;
  uint64_t base;  // device address in the owner's process
  cudaIpcMemHandle_t ipc;
  char bus_id[32];
  bool has_ipc;
  bool ll_fused;  // every rank must use the same low-latency completion
};

// DISPATCH_EP_P2P_FUSED_WAIT: unset, empty or 1 -> fused waits; 0 -> separate wait kernels.
bool llFusedFromEnv() {
  const char* v = std::getenv("DISPATCH_EP_P2P_FUSED_WAIT");
  if (!v || !*v || std::strcmp(v, "1") == 0) return true;
  EP_CHECK(std::strcmp(v, "0") == 0, std::string("DISPATCH_EP_P2P_FUSED_WAIT must be 0 or 1, got '") + v + "'");
  return false;
}

size_t up(size_t& at, size_t bytes) {
  const size_t o = at;
  at += (bytes + 255) / 256 * 256;
  return o;
}

class P2pBackend final : public EpBackend {
 public:
  P2pBackend(const EpConfig& c, EpBackend& boot) : cfg_(c) {
    N_ = c.num_ranks;
    E_ = c.num_experts;
    H_ = c.hidden;
    k_ = c.top_k;
    EP_CHECK(H_ % 8 == 0 && k_ >= 1 && k_ <= 32 && c.align >= 1, "H % 8 == 0, 1 <= k <= 32, align >= 1");
    EP_CHECK(c.max_tokens_ht >= 1 && c.max_tokens_ll >= 1, "max_tokens_ht and max_tokens_ll must be >= 1");
    EP_CUDA(cudaSetDevice(c.device));
    sy_.ll_fused = llFusedFromEnv();
    buildPlacement();
    layoutBuffers();
    allocate();
    connect(boot);
  }

  ~P2pBackend() override {
    cudaSetDevice(cfg_.device);
    for (void* p : opened_) cudaIpcCloseMemHandle(p);
    for (void* p : owned_) cudaFree(p);
    if (host_) cudaFreeHost(host_);
  }

  const char* name() const override { return "p2p"; }

  HtRows dispatchHt(const void* x, const int32_t* ids, const float* w, int T, cudaStream_t s) override {
    EP_CHECK(T >= 0 && T <= cfg_.max_tokens_ht, "T exceeds max_tokens_ht");
    T_ = T;
    launchLayout(ids, T, k_, cfg_.rank, dp_, slot_rank_, in_rank_, per_rank_, s);
    launchSendPositions(in_rank_, T, N_, pos_, s);
    launchHtSendP2p(x, ids, w, slot_rank_, pos_, per_rank_, T, dp_, sh_, sy_, s);
    launchWaitP2p(kHtDispatch, sh_, sy_, Le_, kTimeoutS, s);
    mark(probe_.dispatch_arrived, s);
    launchHtExpandP2p(Le_, cfg_.align, sh_, sy_, counts_, offsets_, next_, row_of_, xs_, s);
    EP_CUDA(cudaMemcpyAsync(h_recv_cnt_, sy_.self + sh_.off.ht_cnt, sizeof(int) * N_, cudaMemcpyDeviceToHost, s));
    EP_CUDA(cudaStreamSynchronize(s));
    int R = 0;
    for (int p = 0; p < N_; ++p) R += h_recv_cnt_[p];
    return {xs_, ys_, offsets_, max_rows_, R};
  }

  void combineHt(void* out, cudaStream_t s) override {
    launchHtCombineSendP2p(ys_, row_of_, l2g_, sh_, sy_, s);
    launchWaitP2p(kHtCombine, sh_, sy_, Le_, kTimeoutS, s);
    mark(probe_.combine_arrived, s);
    launchHtSumP2p(pos_, T_, sh_, sy_, out, s);
  }

  LlRows dispatchLl(const void* x, const int32_t* ids, int T, cudaStream_t s) override {
    EP_CHECK(T >= 0 && T <= cfg_.max_tokens_ll, "T exceeds max_tokens_ll");
    T_ = T;
    launchLlSendP2p(x, ids, T, dp_, sh_, sy_, slot_ok_, kTimeoutS, s);
    if (!sy_.ll_fused) launchWaitP2p(kLlDispatch, sh_, sy_, Le_, kTimeoutS, s);
    mark(probe_.dispatch_arrived, s);  // fused: the send kernel returns once the rows are there
    const int* counts = sy_.ll_fused ? sy_.ll_rows : reinterpret_cast<const int*>(sy_.self + sh_.off.ll_cnt);
    return {sy_.self + sh_.off.ll_x, ll_ys_, counts, N_ * cfg_.max_tokens_ll};
  }

  void combineLl(const int32_t* ids, const float* w, void* out, cudaStream_t s) override {
    launchLlCombineSendP2p(ll_ys_, Le_, sh_, sy_, s);
    if (!sy_.ll_fused) {
      launchWaitP2p(kLlCombine, sh_, sy_, Le_, kTimeoutS, s);
      mark(probe_.combine_arrived, s);
    }
    launchLlReduceP2p(ids, w, slot_ok_, T_, sh_, sy_, out, kTimeoutS, s);
    // fused: the wait is inside the reduce, so the rows' arrival is not separable from the sum
    if (sy_.ll_fused) mark(probe_.combine_arrived, s);
  }

  const int* localToGlobal() const override { return l2g_; }
  int numLocalExperts() const override { return Le_; }

 private:
  static constexpr int kTimeoutS = 20;  // a wait kernel traps after this (a peer that never arrives)

  template <typename T>
  T* alloc(size_t n) {
    void* p = nullptr;
    EP_CUDA(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    owned_.push_back(p);
    return static_cast<T*>(p);
  }

  void buildPlacement() {
    const PlacementTables tb = placementTables(cfg_);
    LeMax_ = tb.le_max;
    const auto& mine = cfg_.placement[cfg_.rank];
    Le_ = int(mine.size());
    int* d_rep = alloc<int>(tb.rep.size());
    int* d_num = alloc<int>(tb.num_rep.size());
    int* d_li = alloc<int>(tb.local_index.size());
    l2g_ = alloc<int>(Le_);
    EP_CUDA(cudaMemcpy(d_rep, tb.rep.data(), tb.rep.size() * sizeof(int), cudaMemcpyHostToDevice));
    EP_CUDA(cudaMemcpy(d_num, tb.num_rep.data(), tb.num_rep.size() * sizeof(int), cudaMemcpyHostToDevice));
    EP_CUDA(cudaMemcpy(d_li, tb.local_index.data(), tb.local_index.size() * sizeof(int), cudaMemcpyHostToDevice));
    if (Le_ > 0) EP_CUDA(cudaMemcpy(l2g_, mine.data(), Le_ * sizeof(int), cudaMemcpyHostToDevice));
    dp_ = {d_rep, d_num, d_li, tb.max_rep, E_, N_};
  }

  // Byte offsets of the symmetric buffer: identical on every rank (same config).
  void layoutBuffers() {
    const size_t maxT = cfg_.max_tokens_ll, Tht = cfg_.max_tokens_ht, cap = N_ * maxT, row = size_t(H_) * 2;
    P2pOffsets& o = sh_.off;
    size_t at = 0;
    o.sig = up(at, sizeof(int) * kKinds * N_);
    o.ll_sig = up(at, sizeof(unsigned long long) * 2 * N_);
    o.ll_x = up(at, size_t(LeMax_) * cap * row);
    o.ll_cnt = up(at, sizeof(int) * std::max(LeMax_, 1));
    o.ll_meta = up(at, sizeof(int) * LeMax_ * cap);
    o.ll_back = up(at, maxT * k_ * row);
    o.ht_x = up(at, size_t(N_) * Tht * row);
    o.ht_le = up(at, sizeof(int) * N_ * Tht * k_);
    o.ht_w = up(at, sizeof(float) * N_ * Tht * k_);
    o.ht_cnt = up(at, sizeof(int) * N_);
    o.ht_back = up(at, size_t(N_) * Tht * row);
    o.total = at;
    sh_.N = N_;
    sh_.me = cfg_.rank;
    sh_.H = H_;
    sh_.k = k_;
    sh_.LeMax = LeMax_;
    sh_.maxT = cfg_.max_tokens_ll;
    sh_.Tht = cfg_.max_tokens_ht;
  }

  void allocate() {
    const size_t Tm = std::max(cfg_.max_tokens_ht, cfg_.max_tokens_ll), Tht = cfg_.max_tokens_ht;
    const size_t recvRows = Tht * N_;  // each peer sends a token at most once
    max_rows_ = int(recvRows * std::min(k_, std::max(Le_, 1)) + size_t(Le_) * (cfg_.align - 1));
    sym_ = alloc<char>(sh_.off.total);
    EP_CUDA(cudaMemset(sym_, 0, sh_.off.total));
    int* words = alloc<int>(2 * kKinds);
    EP_CUDA(cudaMemset(words, 0, sizeof(int) * 2 * kKinds));
    sy_.self = sym_;
    sy_.epoch = words;
    sy_.done = words + kKinds;
    sy_.ll_epoch = alloc<unsigned long long>(1);
    EP_CUDA(cudaMemset(sy_.ll_epoch, 0, sizeof(unsigned long long)));
    sy_.ll_rows = alloc<int>(std::max(LeMax_, 1));
    EP_CUDA(cudaMemset(sy_.ll_rows, 0, sizeof(int) * std::max(LeMax_, 1)));
    slot_rank_ = alloc<int>(Tm * k_);
    in_rank_ = alloc<uint8_t>(Tm * N_);
    per_rank_ = alloc<int>(N_);
    pos_ = alloc<int>(Tht * N_);
    counts_ = alloc<int>(Le_);
    offsets_ = alloc<int>(Le_ + 1);
    next_ = alloc<int>(Le_);
    row_of_ = alloc<int>(recvRows * k_);
    xs_ = alloc<uint16_t>(size_t(max_rows_) * H_);
    ys_ = alloc<uint16_t>(size_t(max_rows_) * H_);
    slot_ok_ = alloc<uint8_t>(size_t(cfg_.max_tokens_ll) * k_);
    ll_ys_ = alloc<uint16_t>(size_t(std::max(Le_, 1)) * N_ * cfg_.max_tokens_ll * H_);
    EP_CUDA(cudaMallocHost(&host_, sizeof(int) * N_));
    h_recv_cnt_ = static_cast<int*>(host_);
    EP_CUDA(cudaDeviceSynchronize());  // the zeroed buffer is in place before any peer learns its address
  }

  // Every rank's card through the bootstrap backend, then a pointer per peer.
  void connect(EpBackend& boot) {
    PeerCard mine{};
    mine.process = processToken();
    mine.base = reinterpret_cast<uint64_t>(sym_);
    // Only peers in other processes need the handle; where IPC is unavailable, those fail below.
    mine.has_ipc = cudaIpcGetMemHandle(&mine.ipc, sym_) == cudaSuccess;
    if (!mine.has_ipc) (void)cudaGetLastError();
    EP_CUDA(cudaDeviceGetPCIBusId(mine.bus_id, sizeof(mine.bus_id), cfg_.device));
    mine.ll_fused = sy_.ll_fused;
    std::vector<uint8_t> bytes(sizeof(PeerCard));
    std::memcpy(bytes.data(), &mine, sizeof(PeerCard));
    const std::vector<uint8_t> all = allGatherBytes(boot, bytes);
    EP_CHECK(all.size() == sizeof(PeerCard) * N_, "bootstrap all-gather returned the wrong size");
    std::vector<char*> bases(N_);
    for (int p = 0; p < N_; ++p) {
      PeerCard card;
      std::memcpy(&card, all.data() + sizeof(PeerCard) * p, sizeof(PeerCard));
      EP_CHECK(card.ll_fused == mine.ll_fused, "rank " + std::to_string(p) + " uses another low-latency completion " +
                                                   "(DISPATCH_EP_P2P_FUSED_WAIT " + (card.ll_fused ? "1" : "0") + ") than rank " +
                                                   std::to_string(cfg_.rank));
      if (p == cfg_.rank) {
        bases[p] = sym_;
        continue;
      }
      int dev = -1;
      if (cudaDeviceGetByPCIBusId(&dev, card.bus_id) != cudaSuccess) {
        (void)cudaGetLastError();
        dev = -1;  // not visible here (one process per GPU with a narrowed CUDA_VISIBLE_DEVICES): IPC decides
      }
      if (dev >= 0) {
        int can = 0, atomics = 0;
        EP_CUDA(cudaDeviceCanAccessPeer(&can, cfg_.device, dev));
        EP_CHECK(can, "GPU " + std::to_string(cfg_.device) + " cannot access GPU " + std::to_string(dev) + " as a peer (no NVLink/P2P)");
        EP_CUDA(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, cfg_.device, dev));
        EP_CHECK(atomics, "no native peer atomics between GPU " + std::to_string(cfg_.device) + " and GPU " + std::to_string(dev));
      }
      if (card.process == mine.process) {
        EP_CHECK(dev >= 0, "peer GPU of the same process not found by PCI bus id");
        const cudaError_t e = cudaDeviceEnablePeerAccess(dev, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
        else EP_CUDA(e);
        bases[p] = reinterpret_cast<char*>(card.base);
      } else {
        EP_CHECK(card.has_ipc, "rank " + std::to_string(p) + " could not export its buffer (cudaIpcGetMemHandle failed)");
        void* q = nullptr;
        EP_CUDA(cudaIpcOpenMemHandle(&q, card.ipc, cudaIpcMemLazyEnablePeerAccess));
        opened_.push_back(q);
        bases[p] = static_cast<char*>(q);
      }
    }
    char** d_bases = alloc<char*>(N_);
    EP_CUDA(cudaMemcpy(d_bases, bases.data(), sizeof(char*) * N_, cudaMemcpyHostToDevice));
    sy_.peers = d_bases;
    // Every rank mapped every peer before anyone writes into a peer's buffer.
    (void)allGatherBytes(boot, std::vector<uint8_t>(1, 1));
  }

  EpConfig cfg_;
  int N_ = 1, E_ = 0, H_ = 0, k_ = 0, Le_ = 0, LeMax_ = 0, T_ = 0, max_rows_ = 0;
  DevPlacement dp_{};
  P2pShape sh_{};
  P2pSync sy_{};
  std::vector<void*> owned_, opened_;
  void* host_ = nullptr;
  int* h_recv_cnt_ = nullptr;
  char* sym_ = nullptr;
  int *slot_rank_ = nullptr, *per_rank_ = nullptr, *pos_ = nullptr, *counts_ = nullptr, *offsets_ = nullptr, *next_ = nullptr,
      *row_of_ = nullptr, *l2g_ = nullptr;
  uint8_t *in_rank_ = nullptr, *slot_ok_ = nullptr;
  void *xs_ = nullptr, *ys_ = nullptr, *ll_ys_ = nullptr;
};

}  // namespace

std::unique_ptr<EpBackend> createP2pBackend(const EpConfig& cfg, EpBackend& nccl_bootstrap) {
  return std::make_unique<P2pBackend>(cfg, nccl_bootstrap);
}

}  // namespace dispatch::ep
