// Device kernels of the NVLink peer-write backend (ep_p2p.cpp): senders store rows straight into
// the receivers' buffers (peer pointers: cudaDeviceEnablePeerAccess in one process, cudaIpc
// across processes), then raise a per-exchange flag on every peer; a one-block wait kernel spins
// on the flags. Only real rows cross NVLink (no capacity padding, no NCCL proxy, no host sync in
// low-latency mode). Launches are async on a stream and never read device data on the host.
//
// Legend: T local tokens, k top-k, H hidden (bf16, H % 8 == 0), N ranks, Le/LeMax local experts
// (this rank / the largest), maxT low-latency tokens per rank, cap = N * maxT, Tht high-throughput
// tokens per rank.
//
// Symmetric buffer (same byte offsets on every rank; P2pOffsets):
//   sig      int [kKinds][N]            flag raised by source s for exchange kind q at [q][s]
//   ll_sig   u64 [2][N]                 fused low-latency path: shares of dispatch (0) / combine (1)
//                                        received from source s at [q][s]; kLlShare per exchange
//   ll_x     bf16 [LeMax][cap][H]        low-latency rows, the masked layout the GEMM reads
//   ll_cnt   int [LeMax]                 rows per local expert (system atomics by the senders)
//   ll_meta  int [LeMax][cap]            source of each row: src * maxT * k + t * k + j
//   ll_back  bf16 [maxT * k][H]          combine: expert outputs back at the source, by slot
//   ht_x     bf16 [N][Tht][H]            high-throughput tokens by source, in the source's order
//   ht_le    int [N][Tht][k], ht_w float [N][Tht][k]   slot metadata (local expert or -1, weight)
//   ht_cnt   int [N]                     tokens from each source
//   ht_back  bf16 [N][Tht][H]            combine: each rank's partial sum, at the source
//
// Ordering: every exchange is a barrier (a rank waits for all peers' flags), and each buffer is
// only written by peers one exchange after its owner last read it, so one copy of each suffices
// as long as dispatch and combine alternate on one stream (the EpBackend contract).
//
// Low-latency completion, two variants (P2pSync::ll_fused, the same on every rank):
//   fused (default): every block of a send kernel fences (system scope) and adds its share to the
//     kind's ll_sig word on every rank with one red.release.sys; a kernel's shares sum to kLlShare
//     (block 0: kLlShare - (G - 1), the others 1), so a receiver knows an exchange is complete when
//     each source's word reaches epoch * kLlShare, without knowing the sender's grid. The waits are
//     inside the backend's next kernel: block 0 of the dispatch send kernel waits for every
//     source's dispatch shares, then copies the counts (clamped to cap) into ll_rows, the counts
//     handed to the GEMM, and zeroes ll_cnt for the next dispatch; each block of the reduce kernel
//     waits for every source's combine shares before reading ll_back. Dispatch: 1 kernel; combine: 2.
//   old (DISPATCH_EP_P2P_FUSED_WAIT=0): finishAndSignal (block fence, done counter, the last block
//     raises sig) and a separate one-block wait kernel after each send kernel; ll_cnt is zeroed by
//     the combine send kernel. Dispatch: 2 kernels; combine: 3.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "ep_kernels.cuh"

namespace dispatch::ep {

enum P2pKind { kLlDispatch = 0, kLlCombine = 1, kHtDispatch = 2, kHtCombine = 3, kKinds = 4 };

struct P2pOffsets {
  size_t sig, ll_sig, ll_x, ll_cnt, ll_meta, ll_back, ht_x, ht_le, ht_w, ht_cnt, ht_back, total;
};

// Static shape of the exchange, the same on every rank.
struct P2pShape {
  int N, me, H, k, LeMax, maxT, Tht;
  P2pOffsets off;
};

// Shares of one low-latency exchange from one source (fused path); a send kernel has at most this
// many blocks.
constexpr unsigned long long kLlShare = 1ull << 24;

// Local (not shared) progress words: epoch [kKinds] (exchanges done per kind), done [kKinds]
// (blocks finished in the running send kernel); fused low-latency path: ll_epoch (low-latency
// dispatches done, written by the dispatch's waiting block), ll_rows [LeMax] (rows per local
// expert of the last dispatch, clamped to cap: the counts handed to the GEMM and the combine).
struct P2pSync {
  char* const* peers;  // [N] device array of symmetric bases, peers[me] = own
  char* self;          // own symmetric base
  int* epoch;
  int* done;
  unsigned long long* ll_epoch;
  int* ll_rows;
  bool ll_fused;
};

// Low-latency dispatch: row of each (token, slot) into the serving rank's ll_x; slot_ok [T*k].
// Fused (sy.ll_fused): also waits for every source's rows and fills sy.ll_rows (no wait kernel).
// timeout_s: seconds before a wait traps (a peer that never arrives).
void launchLlSendP2p(const void* x, const int32_t* ids, int T, DevPlacement p, P2pShape sh, P2pSync sy, uint8_t* slot_ok,
                     int timeout_s, cudaStream_t s);
// Waits until every peer raised kind's flag for this rank's current epoch; then, for kLlDispatch,
// clamps ll_cnt to cap. Old low-latency path and high-throughput only.
void launchWaitP2p(P2pKind kind, P2pShape sh, P2pSync sy, int Le, int timeout_s, cudaStream_t s);
// Low-latency combine: each received row of ys [Le][cap][H] back to its source's ll_back. Old
// path: zeroes ll_cnt before the flag (the next dispatch's senders count from 0); fused: reads
// ll_rows (ll_cnt was zeroed by the dispatch).
void launchLlCombineSendP2p(const void* ys, int Le, P2pShape sh, P2pSync sy, cudaStream_t s);
// out[t] = sum over sent slots, ascending expert id, of w * ll_back[t*k + j] (fp32 sum, bf16 out).
// Fused: each block first waits for every source's combine shares; launched even at T = 0 (one
// block that only waits: the barrier orders this rank's next dispatch after the peers' reads).
void launchLlReduceP2p(const int32_t* ids, const float* w, const uint8_t* slot_ok, int T, P2pShape sh, P2pSync sy, void* out,
                       int timeout_s, cudaStream_t s);

// High-throughput dispatch: token t once to each rank d with pos[t*N+d] >= 0, at ht_x[me][pos];
// ht_cnt[me] on d := tokens_per_rank[d].
void launchHtSendP2p(const void* x, const int32_t* ids, const float* w, const int* slot_rank, const int* pos,
                     const int* tokens_per_rank, int T, DevPlacement p, P2pShape sh, P2pSync sy, cudaStream_t s);
// Expansion of the received tokens into aligned contiguous per-expert rows (as launchHtExpand):
// counts [Le] (zeroed here), offsets [Le+1], next [Le] workspace, row_of [N*Tht*k].
void launchHtExpandP2p(int Le, int align, P2pShape sh, P2pSync sy, int* counts, int* offsets, int* next, int* row_of, void* xs,
                       cudaStream_t s);
// High-throughput combine: each received token's local slots reduced (weighted, ascending global
// expert) and stored as one bf16 row at its source's ht_back[me][i].
void launchHtCombineSendP2p(const void* ys, const int* row_of, const int* local_to_global, P2pShape sh, P2pSync sy, cudaStream_t s);
// out[t] = sum over ranks d ascending with pos[t*N+d] >= 0 of ht_back[d][pos] (fp32 sum, bf16 out).
void launchHtSumP2p(const int* pos, int T, P2pShape sh, P2pSync sy, void* out, cudaStream_t s);

}  // namespace dispatch::ep
