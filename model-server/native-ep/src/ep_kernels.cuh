// Device kernels of native-ep's dispatch/combine (host launchers, async on a stream, no host
// reads of device data). Rows are bf16 [*, H] with H % 8 == 0; sums are fp32.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace dispatch::ep {

// Placement tables on the device: replicas of e are rep[e*maxRep .. e*maxRep + numRep[e]),
// localIndex[r*E + e] = local index of e on rank r or -1.
struct DevPlacement {
  const int* rep;
  const int* num_rep;
  const int* local_index;
  int max_rep;
  int E;
  int N;
};

// slot_rank [T*k]; is_token_in_rank [T*N] (0/1); tokens_per_rank [N] (zeroed here first).
void launchLayout(const int32_t* ids, int T, int k, int src_rank, DevPlacement p, int* slot_rank,
                  uint8_t* is_token_in_rank, int* tokens_per_rank, cudaStream_t s);

// Position of token t in rank d's send list (ascending t) or -1: pos [T*N]; one CTA per rank.
void launchSendPositions(const uint8_t* is_token_in_rank, int T, int N, int* pos, cudaStream_t s);

// High-throughput pack: send_x[send_off[d] + pos] = x[t]; send_le/send_w [*, k] slot metadata
// (send_w null: no weights; the NCCL backend's token-sized low-latency dispatch packs this way).
void launchHtPack(const void* x, const int32_t* ids, const float* w, const int* slot_rank, const int* pos,
                  const int* send_off, int T, int k, int H, DevPlacement p, void* send_x, int* send_le,
                  float* send_w, cudaStream_t s);

// Expand R received tokens into aligned contiguous per-expert rows. counts/offsets [Le(+1)],
// row_of [R*k] (-1: slot served elsewhere). workspace: Le ints.
void launchHtExpand(const void* recv_x, const int* recv_le, int R, int k, int H, int Le, int align, int* counts,
                    int* offsets, int* row_of, int* workspace, void* xs, cudaStream_t s);

// partial[r] = sum over r's local slots, ascending global expert, of w * ys[row]; bf16 out.
void launchHtReduce(const void* ys, const int* row_of, const int* recv_le, const float* recv_w, const int* local_to_global,
                    int R, int k, int H, void* partial, cudaStream_t s);

// out[t] = sum over ranks d ascending with pos[t,d] >= 0 of back[back_off[d] + pos[t,d]].
void launchHtSum(const void* back, const int* pos, const int* back_off, int T, int N, int H, void* out, cudaStream_t s);

// Low-latency pack into fixed per-peer regions [N][LeMax][maxT][H]; send_count [N*LeMax] zeroed here;
// slot_pos [T*k] = (le * maxT + j) inside the peer region.
void launchLlPack(const void* x, const int32_t* ids, const int* slot_rank, int T, int k, int H, int LeMax, int maxT,
                  DevPlacement p, void* send_x, int* send_count, int* slot_pos, cudaStream_t s);

// [N src][LeMax][maxT][H] + counts [N][LeMax] -> [Le, cap = N*maxT, H] + counts [Le] (and back).
void launchLlCompact(const void* recv_x, const int* recv_count, int N, int Le, int LeMax, int maxT, int H, void* xs,
                     int* counts, cudaStream_t s);
void launchLlScatterBack(const void* ys, const int* recv_count, int N, int Le, int LeMax, int maxT, int H, void* back,
                         cudaStream_t s);

// out[t] = sum over slots j, ascending expert id, of w[t,j] * back[slot_rank][slot_pos] (fp32 sum, bf16 out).
void launchLlReduce(const void* back, const int32_t* ids, const float* w, const int* slot_rank, const int* slot_pos, int T,
                    int k, int H, int LeMax, int maxT, void* out, cudaStream_t s);

// Test expert for the binding's round trip: ys[row] = scale[global expert of row's group] * xs[row].
void launchScaleRows(const void* xs, void* ys, const int* begin, const int* count, int cap_or_zero, const int* local_to_global,
                     const float* scale, int Le, int H, int max_rows, cudaStream_t s);

}  // namespace dispatch::ep
