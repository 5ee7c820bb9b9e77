// Expert-parallel dispatch/combine on GPUs: the contract of model-server/src/parallel
// (see docs/expert-parallelism.md), device side. One EpGroup per rank (one process per
// GPU); all calls are collective: every rank makes them in the same order.
//
// Legend: T local tokens, k top-k, H hidden (bf16 rows), E experts, Le local experts,
// N ranks, R received tokens, M expanded rows, cap = maxTokensLl * N.
//
// High-throughput (prefill): tokens go once per destination rank; the receiver expands
//   them into contiguous per-expert rows (groups aligned to `align`) for
//   sm90_bf16_grouped_gemm_contiguous; combine reduces each received token's local slots
//   (weighted, ascending global expert) and sums the ranks' partials at the source in
//   ascending rank order. Needs one host sync per dispatch (receive counts), as DeepEP's
//   normal mode does.
// Low-latency (decode): fixed shapes from maxTokensLl alone (CUDA-graph capturable, no
//   host reads): receive into [Le, cap, H] with counts [Le] (the masked layout); combine
//   returns each row and the source reduces its k rows with its own weights.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dispatch::ep {

struct EpConfig {
  int rank = 0;
  int num_ranks = 1;
  int device = 0;
  int num_experts = 0;
  int hidden = 0;       // H, a multiple of 8 (16-byte row copies)
  int top_k = 0;
  int max_tokens_ht = 4096;  // largest T per rank in high-throughput mode
  int max_tokens_ll = 128;   // low-latency capacity per rank (DeepEP's num_max_dispatch_tokens_per_rank)
  int align = 1;             // row alignment of each expert's group in high-throughput mode
  // NCCL backend, low-latency mode: false (as first measured) sends each peer the whole capacity
  // region [LeMax][maxTokensLl][H] both ways; true sends each token once per peer ([maxTokensLl][H])
  // and returns [maxTokensLl * k][H] (ep_ll_tokens.cuh). Both fixed-size, no host sync.
  bool ll_wire_tokens = false;
  // placement[r] = global expert ids held by rank r (replicas allowed; same rule as placement.ts)
  std::vector<std::vector<int>> placement;
};

// Device views handed to the grouped GEMM between dispatch and combine.
struct HtRows {
  void* xs;             // [M_max, H] bf16, expert groups at offsets
  void* ys;             // [M_max, H] bf16, written by the caller's GEMMs
  const int* offsets;   // [Le+1] device (aligned group starts)
  int max_rows;         // M_max (allocation bound; offsets[Le] is the real M)
  int num_recv_tokens;  // R (host, known after the dispatch's sync)
};

struct LlRows {
  void* xs;            // [Le, cap, H] bf16
  void* ys;            // [Le, cap, H] bf16
  const int* counts;   // [Le] device
  int cap;
};

// Optional timing probes (benchmarks): a backend records dispatch_arrived once a dispatch's rows
// have arrived (before the expansion or compaction into per-expert rows) and combine_arrived once
// a combine's rows are back at the source (before its final sum). Null events are not recorded.
struct EpProbe {
  cudaEvent_t dispatch_arrived = nullptr;
  cudaEvent_t combine_arrived = nullptr;
};

class EpBackend {
 public:
  virtual ~EpBackend() = default;
  // Backends without probe points (DeepEP) leave the events unrecorded.
  void setProbe(EpProbe p) { probe_ = p; }
  virtual const char* name() const = 0;
  // x [T, H] bf16, ids [T, k] int32, weights [T, k] fp32: all device, T <= max_tokens_ht.
  virtual HtRows dispatchHt(const void* x, const int32_t* ids, const float* weights, int T, cudaStream_t s) = 0;
  // Reads the ys of the last dispatchHt; out [T, H] bf16.
  virtual void combineHt(void* out, cudaStream_t s) = 0;
  virtual LlRows dispatchLl(const void* x, const int32_t* ids, int T, cudaStream_t s) = 0;
  // ids/weights: the same device arrays given to dispatchLl (the source reduces its own k rows).
  virtual void combineLl(const int32_t* ids, const float* weights, void* out, cudaStream_t s) = 0;
  // [Le] device: global expert id of each local expert; Le.
  virtual const int* localToGlobal() const = 0;
  virtual int numLocalExperts() const = 0;

 protected:
  void mark(cudaEvent_t e, cudaStream_t s) const {
    if (e) cudaEventRecord(e, s);
  }
  EpProbe probe_{};
};

// NCCL all-to-all (ncclSend/ncclRecv in one group per exchange). uniqueId: 128 bytes from
// ncclGetUniqueId on rank 0, shared with every rank out of band.
std::unique_ptr<EpBackend> createNcclBackend(const EpConfig& cfg, const void* unique_id);

// NVLink peer writes (ep_p2p.cpp): ranks on one host with peer access between their GPUs; one
// process driving several GPUs or one process per GPU (cudaIpc). Buffers are swapped once through
// nccl_bootstrap (an NCCL backend of the same ranks); no NCCL call after construction.
std::unique_ptr<EpBackend> createP2pBackend(const EpConfig& cfg, EpBackend& nccl_bootstrap);

// Every rank's `mine` (same size on all), in rank order, through an NCCL backend's communicator
// (bootstraps the DeepEP backend: IPC handles, device ids).
std::vector<uint8_t> allGatherBytes(EpBackend& nccl_backend, const std::vector<uint8_t>& mine);

// The DeepEP plugin's entry point (deepep_backend.cpp, built only where DeepEP's headers are):
// returns nullptr with *why set when this configuration is not one DeepEP serves.
using CreateDeepEpFn = EpBackend* (*)(const EpConfig& cfg, EpBackend& nccl_bootstrap, std::string* why);
constexpr const char* kDeepEpCreateSymbol = "dispatch_ep_create_deepep";

// Bytes of a unique id from the loaded NCCL; throws when NCCL is not loadable.
std::vector<uint8_t> ncclUniqueIdBytes();
// NCCL version (e.g. 22805) or 0 with *why set when the library is not loadable.
int ncclVersionOrZero(std::string* why);

}  // namespace dispatch::ep
