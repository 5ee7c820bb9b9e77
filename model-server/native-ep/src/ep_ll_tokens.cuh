// Low-latency exchange of the NCCL backend with token-sized wire regions (EpConfig::ll_wire_tokens).
// Dispatch sends each token once per peer that serves one of its slots: [N][maxT][H] rows with
// [N][maxT][k] slot metadata (the peer's local expert or -1) and the count, fixed sizes, so no
// host sync; the receiver expands them into the masked layout [Le][cap][H]. Combine returns each
// (token, slot) row to its source at [N][maxT*k][H] (position * k + slot) and the source reduces.
// Per peer and call that is maxT*H (dispatch) and maxT*k*H (combine) bf16 instead of the capacity
// region LeMax*maxT*H both ways. Legend as ep.h; cap = N * maxT.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace dispatch::ep {

// recv_x [N][maxT][H], recv_le [N][maxT][k], recv_n [N] -> xs [Le][cap][H], counts [Le] (zeroed
// here, clamped to cap), row_src [Le][cap] = (src * maxT + position) * k + slot.
void launchLlExpandTokens(const void* recv_x, const int* recv_le, const int* recv_n, int N, int maxT, int k, int H, int Le,
                          void* xs, int* counts, int* row_src, cudaStream_t s);

// ret[row_src[r]] = ys[r] for every received row r: ret [N][maxT*k][H].
void launchLlReturnTokens(const void* ys, const int* counts, const int* row_src, int N, int maxT, int k, int H, int Le, void* ret,
                          cudaStream_t s);

// out[t] = sum over served slots j (slot_rank >= 0), ascending expert id, of
// w[t,j] * back[slot_rank][pos[t, slot_rank] * k + j]; back [N][maxT*k][H] (fp32 sum, bf16 out).
void launchLlReduceTokens(const void* back, const int32_t* ids, const float* w, const int* slot_rank, const int* pos, int T,
                          int N, int maxT, int k, int H, void* out, cudaStream_t s);

}  // namespace dispatch::ep
