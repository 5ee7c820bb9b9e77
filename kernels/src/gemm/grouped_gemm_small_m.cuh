// Grouped GEMM for few rows per expert (decode): Y[r, n] = sum_k X[r, k] * W[e, n, k] (* scale[e, n]).
// This file: the shared chunk load / MMA code and the legacy schedule (g_small_m_impl = 1); the default
// schedule is in grouped_gemm_small_m_stream.cuh.
// Bound by reading each active expert's weights once, so the kernel streams weight rows with
// 16-byte loads and keeps the (tiny) activation block in L1/L2.
//
// Legend: E experts, N output features, K input features, m rows routed to one expert.
// Tensor-core trick ("swap AB"): the weight rows are the MMA's M side (16 rows per warp) and the
// tokens its N side (8 per n-tile), so one token costs one m16n8k16 per 16x16 weight block.
// Each thread loads 16 contiguous bytes of a weight row and the same 16 positions of the token
// row: k inside a chunk is permuted identically for both operands, which leaves the dot product
// unchanged and lets every load be 16 bytes wide (no ldmatrix, no shared-memory staging).
//
// CTA = 4 warps on 1-4 blocks of 16 weight rows; the warps split K, stream their (row block,
// chunk) items with 2-4 chunks of loads in flight, and reduce through shared memory.
// grid = (N / 16 / row blocks per CTA, max_active): blockIdx.y is the rank among experts with rows, found on the
// device from the counts, so the launch shape never depends on the routing (CUDA-graph safe).
//
// Programmatic Dependent Launch (legacy kernel, g_small_m_pdl_mode, off by default). The kernel may then start
// while the previous kernel on the stream runs; griddepcontrol.wait returns once that kernel has completed
// and its writes are visible; griddepcontrol.launch_dependents lets the next kernel start once every CTA of
// this one has called it (or exited). The rule this kernel keeps: it triggers only after its own wait, so
// once a kernel after it has started, the kernel before it has completed. Hence the per-launch flag
// kRoutingReady (routing_ready_before_wait) is safe when the routing (offsets / counts) was written at
// least two kernels back, a kernel keeping this rule sits in between, and W is not written by the previous
// kernel: the kernel then finds its expert and issues its first weight loads before its wait, and waits
// before it reads X. The MoE layer: route (writes routing and X) -> gate|up (reads both right away:
// kRoutingReady = false, waits first) -> down (kRoutingReady = true; X is gate|up's output). native-cuda's
// dequantized int8 scratch is written by the kernel right before its GEMM, so that path passes false.
// With kRoutingReady an idle CTA exits without waiting, except CTA (0, 0), so this grid's completion still
// implies the previous grid's (a later kernel's wait on this grid then covers gate|up too).
#pragma once
#include "../common/bf16.cuh"
#include "../common/rows.h"
#include "../common/sm90.cuh"
#include "../moe/topk_warp.cuh"

namespace dispatch {

constexpr int kSmallWarps = 4;
constexpr int kSmallRows = 16;

// Rank-th expert (0-based) among those with count > 0, or -1. All threads get the answer.
__device__ __forceinline__ int find_active_expert(const ExpertRows& rows, int E, int rank) {
  __shared__ int s_cnt[kSmallWarps];
  __shared__ int s_expert;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) s_expert = -1;
  __syncthreads();
  for (int base = 0; base < E; base += kSmallWarps * 32) {
    const int e = base + tid;
    const bool has = e < E && rows.count(e) > 0;
    const unsigned bal = __ballot_sync(0xffffffffu, has);
    if (lane == 0) s_cnt[warp] = __popc(bal);
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kSmallWarps; ++w) {
      before += w < warp ? s_cnt[w] : 0;
      total += s_cnt[w];
    }
    if (has && before + __popc(bal & ((1u << lane) - 1)) == rank) s_expert = e;
    __syncthreads();
    if (rank < total) break;
    rank -= total;
  }
  return s_expert;
}

template <bool kInt8>
struct SmallMChunk {
  static constexpr int kK = kInt8 ? 128 : 64;  // k covered by one warp-chunk
  uint4 a[2][2];                               // [row g / g+8][first / second half]

  __device__ __forceinline__ void load(const uint8_t* w_rows, size_t row_stride_bytes, int kbase, int t) {
    constexpr int kElemBytes = kInt8 ? 1 : 2;
    const size_t off = size_t(kbase) * kElemBytes + t * 16;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint8_t* p = w_rows + r * 8 * row_stride_bytes + off;
      a[r][0] = ldg_stream(p);
      a[r][1] = ldg_stream(p + kK * kElemBytes / 2);
    }
  }
};

// One chunk of MMAs: all n-tiles that hold tokens, A fragments reused across them.
template <bool kInt8, int NT>
__device__ __forceinline__ void small_m_compute(const SmallMChunk<kInt8>& c, float (&acc)[NT][4],
                                                const __nv_bfloat16* x_rows, int K, int kbase, int t,
                                                int g, int m_left, int last_row) {
  constexpr int kK = SmallMChunk<kInt8>::kK;
  uint32_t a[2][2][kInt8 ? 8 : 4];  // [row][half][bf16x2 words]
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t* q = reinterpret_cast<const uint32_t*>(&c.a[r][h]);
      if constexpr (kInt8) {
#pragma unroll
        for (int i = 0; i < 4; ++i) int8x4_to_bf16x4(q[i], a[r][h][2 * i], a[r][h][2 * i + 1]);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[r][h][i] = q[i];
      }
    }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (nt * 8 >= m_left) break;  // warp-uniform
    const int row = min(nt * 8 + g, last_row);
    const __nv_bfloat16* xp = x_rows + size_t(row) * K + kbase + t * (kInt8 ? 16 : 8);
    constexpr int kWords = kInt8 ? 8 : 4;
    uint32_t b[2][kWords];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4* p = reinterpret_cast<const uint4*>(xp + h * kK / 2);
#pragma unroll
      for (int v = 0; v < kWords / 4; ++v) {
        const uint4 u = __ldg(p + v);
        b[h][4 * v] = u.x, b[h][4 * v + 1] = u.y, b[h][4 * v + 2] = u.z, b[h][4 * v + 3] = u.w;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int s = 0; s < kWords / 2; ++s)
        mma_bf16_16816(acc[nt], a[0][h][2 * s], a[1][h][2 * s], a[0][h][2 * s + 1], a[1][h][2 * s + 1],
                       b[h][2 * s], b[h][2 * s + 1]);
  }
}

// kRB = 2 ("pair" schedule): one warp item covers two adjacent 16-row blocks, so each activation
// fragment (L1 load) feeds two MMAs, each weight is dequantized once (half by half, to bound the
// live registers), the warp has twice the bytes in flight per item, and two independent MMA chains.
template <bool kInt8, int NT, int kRB>
__device__ __forceinline__ void small_m_compute_rb(const SmallMChunk<kInt8> (&c)[kRB], float (&acc)[kRB][NT][4],
                                                   const __nv_bfloat16* x_rows, int K, int kbase, int t,
                                                   int g, int m_left, int last_row) {
  constexpr int kK = SmallMChunk<kInt8>::kK;
  constexpr int kWords = kInt8 ? 8 : 4;  // bf16x2 words per row per half
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint32_t a[kRB][2][kWords];  // [row block][row g / g+8]
#pragma unroll
    for (int b = 0; b < kRB; ++b)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint32_t* q = reinterpret_cast<const uint32_t*>(&c[b].a[r][h]);
        if constexpr (kInt8) {
#pragma unroll
          for (int i = 0; i < 4; ++i) int8x4_to_bf16x4(q[i], a[b][r][2 * i], a[b][r][2 * i + 1]);
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[b][r][i] = q[i];
        }
      }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (nt * 8 >= m_left) break;  // warp-uniform
      const int row = min(nt * 8 + g, last_row);
      const uint4* p = reinterpret_cast<const uint4*>(x_rows + size_t(row) * K + kbase + t * (kInt8 ? 16 : 8) + h * kK / 2);
      uint32_t bw[kWords];
#pragma unroll
      for (int v = 0; v < kWords / 4; ++v) {
        const uint4 u = __ldg(p + v);
        bw[4 * v] = u.x, bw[4 * v + 1] = u.y, bw[4 * v + 2] = u.z, bw[4 * v + 3] = u.w;
      }
#pragma unroll
      for (int s = 0; s < kWords / 2; ++s)
#pragma unroll
        for (int b = 0; b < kRB; ++b)
          mma_bf16_16816(acc[b][nt], a[b][0][2 * s], a[b][1][2 * s], a[b][0][2 * s + 1], a[b][1][2 * s + 1],
                         bw[2 * s], bw[2 * s + 1]);
    }
  }
}

// Row blocks a CTA may take (shared-memory slots for the split-K partials).
template <int NT>
__host__ __device__ constexpr int small_m_slots() { return NT <= 2 ? 4 : NT == 4 ? 2 : 1; }
// With kRB row blocks per warp item a CTA needs at least kRB slots (and takes a multiple of kRB).
template <int NT, int kRB>
__host__ __device__ constexpr int small_m_slots_rb() { return small_m_slots<NT>() > kRB ? small_m_slots<NT>() : kRB; }

// The CTA's share of expert e: row blocks rb0 .. rb0 + rb_per_cta - 1 of W for the expert's m rows, X rows
// x0 .. x0 + m - 1 in, Y rows r0 .. r0 + m - 1 out (the legacy kernel: x0 = r0, the expert's rows of the contiguous
// layout). before_x() runs once every warp has its first weight loads in flight and before any X is read (all
// threads call it): the legacy kernel's kRoutingReady wait (see "Programmatic Dependent Launch" above), the fused
// one-token kernel's wait for gate|up's activations.
template <bool kInt8, int NT, int kDepth, typename BeforeX>
__device__ __forceinline__ void small_m_expert(const __nv_bfloat16* __restrict__ X, const uint8_t* __restrict__ W,
                                               const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                               int e, int m, int r0, int x0, int E, int N, int K, int fuse_silu,
                                               int rb0, int rb_per_cta, BeforeX before_x) {
  constexpr int kK = SmallMChunk<kInt8>::kK;
  constexpr int kTok = NT * 8;
  constexpr int kSlots = small_m_slots<NT>();
  __shared__ float s_red[kSlots][kSmallWarps][kTok][kSmallRows + 1];
  __shared__ int s_done[kSlots];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  if (tid < kSlots) s_done[tid] = 0;
  __syncthreads();
  const int n_rb = min(rb_per_cta, N / kSmallRows - rb0);
  const size_t row_bytes = size_t(K) * (kInt8 ? 1 : 2);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
  const int e_w = (e + 1) % E;
#else
  const int e_w = e;
#endif
  const uint8_t* w_base = W + (size_t(e_w) * N + size_t(rb0) * kSmallRows + g) * row_bytes;
  const int chunks = K / kK;
  const int parts = min(kSmallWarps, chunks);                         // warps holding a K slice
  const int mine = (chunks - warp + kSmallWarps - 1) / kSmallWarps;  // chunks warp, warp+4, ...
  const int total = n_rb * mine;  // this warp's work: (row block, chunk) items, one flat stream
  auto w_rows = [&](int item) { return w_base + size_t(item / mine) * kSmallRows * row_bytes; };
  auto kbase = [&](int item) { return (warp + (item % mine) * kSmallWarps) * kK; };

  for (int pass = 0; pass < m; pass += kTok) {
    const int m_left = m - pass;
    const __nv_bfloat16* x_rows = X + size_t(x0 + pass) * K;
    float acc[NT][4];
#pragma unroll
    for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;

    // Software pipeline over the flat stream: kDepth items of this warp in flight, a slot is
    // refilled right after its MMAs, across row-block boundaries too.
    SmallMChunk<kInt8> buf[kDepth];
#pragma unroll
    for (int p = 0; p < kDepth; ++p)
      if (p < total) buf[p].load(w_rows(p), row_bytes, kbase(p), t);
    if (pass == 0) before_x();  // the first weight loads are in flight; X follows
    for (int i = 0; i < total; i += kDepth) {
#pragma unroll
      for (int p = 0; p < kDepth; ++p) {
        const int item = i + p;
        if (item >= total) break;
        small_m_compute<kInt8, NT>(buf[p], acc, x_rows, K, kbase(item), t, g, m_left, m_left - 1);
        if (item + kDepth < total) buf[p].load(w_rows(item + kDepth), row_bytes, kbase(item + kDepth), t);
        if (item % mine != mine - 1) continue;
        // This warp's K slice of row block rb is done: park the partial sums; the last warp of
        // the CTA to get here adds the slices and writes the outputs (no CTA-wide barrier, so
        // the loads already in flight for the next row block keep streaming).
        const int rb = item / mine;
        // Accumulator (row = weight row, col = token): c0,c1 -> (g, 2t..2t+1), c2,c3 -> (g+8, ..).
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          s_red[rb][warp][nt * 8 + 2 * t][g] = acc[nt][0];
          s_red[rb][warp][nt * 8 + 2 * t + 1][g] = acc[nt][1];
          s_red[rb][warp][nt * 8 + 2 * t][g + 8] = acc[nt][2];
          s_red[rb][warp][nt * 8 + 2 * t + 1][g + 8] = acc[nt][3];
          acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
        }
        __threadfence_block();
        __syncwarp();
        int prev = 0;
        if (lane == 0) prev = atomicAdd(&s_done[rb], 1);
        prev = __shfl_sync(0xffffffffu, prev, 0);
        if (prev != parts - 1) continue;
        __threadfence_block();
        const int n0 = (rb0 + rb) * kSmallRows;
        auto sum = [&](int tok, int r) {
          float v = 0.f;
          for (int w = 0; w < parts; ++w) v += s_red[rb][w][tok][r];
          if constexpr (kInt8) v *= __ldg(scales + size_t(e_w) * N + n0 + r);
          return v;
        };
        if (!fuse_silu) {
          for (int j = lane; j < kTok * kSmallRows; j += 32) {
            const int tok = j / kSmallRows, r = j % kSmallRows;
            if (tok < m_left) Y[size_t(r0 + pass + tok) * N + n0 + r] = __float2bfloat16_rn(sum(tok, r));
          }
        } else {  // gate/up interleaved by 8 rows: rows r (gate) and r + 8 (up) -> act column n0/2 + r
          for (int j = lane; j < kTok * 8; j += 32) {
            const int tok = j / 8, r = j % 8;
            if (tok < m_left) {
              const float gate = sum(tok, r), up = sum(tok, r + 8);
              Y[size_t(r0 + pass + tok) * (N / 2) + n0 / 2 + r] = __float2bfloat16_rn(__fdividef(gate, 1.f + __expf(-gate)) * up);
            }
          }
        }
        if (lane == 0) s_done[rb] = 0;  // ready for the next pass
      }
    }
    __syncthreads();  // the next pass reuses the slots
  }
}

template <bool kInt8, int NT, int kDepth, bool kRoutingReady = false>
__global__ void __launch_bounds__(kSmallWarps * 32, NT == 1 && kDepth == 2 ? 7 : 1)
    grouped_gemm_small_m_kernel(const __nv_bfloat16* __restrict__ X, const uint8_t* __restrict__ W,
                                const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                ExpertRows rows, int E, int N, int K, int fuse_silu, int rb_per_cta) {
  if constexpr (!kRoutingReady) {  // both no-ops unless launched with PDL (see common/launch.h)
    pdl_wait();
    pdl_trigger();
  }
  const int e = find_active_expert(rows, E, blockIdx.y);
  if (e < 0) {
    if constexpr (kRoutingReady)
      if (blockIdx.x == 0 && blockIdx.y == 0) pdl_wait();
    return;
  }
  const int r0 = rows.begin(e);
  small_m_expert<kInt8, NT, kDepth>(X, W, scales, Y, e, rows.count(e), r0, r0, E, N, K, fuse_silu,
                                    int(blockIdx.x) * rb_per_cta, rb_per_cta, [] {
                                      if constexpr (kRoutingReady) {  // X is the previous kernel's output
                                        pdl_wait();
                                        pdl_trigger();
                                      }
                                    });
}

// Self-routed (one token, bf16; grouped_gemm.h's moe_gate_up_self_routed): warp 0 runs the router's top-k on the
// token's logits (moe/topk_warp.cuh), ranks the k choices by expert id, and the CTA takes the choice of rank
// blockIdx.y: its expert's rows against the token's one X row, output row = that rank (the contiguous layout of a
// one-token step). CTA (0, 0) writes the routing the later kernels read: ids, weights and slot_row (slot j -> its
// rank) per choice, counts and offsets per expert. S slots per lane of the top-k (E <= 32 S).
// The one-token routing of the self-routed kernels, run by every CTA: warp 0 runs the router's top-k on the token's
// logits (moe/topk_warp.cuh) and ranks the k choices by expert id into s_ids (rank -> expert); `writer` also stores
// the routing the later kernels read: ids, weights and slot_row (choice j -> its rank) per choice, counts and offsets
// per expert (the contiguous layout of k rows). Ends with a CTA barrier. S slots per lane (E <= 32 S).
template <int S>
__device__ __forceinline__ void self_route(const SelfRoute& sr, int E, bool writer, int* s_ids) {
  const int tid = threadIdx.x, lane = tid & 31, k = sr.cfg.top_k;
  if (tid < 32) {
    int id = 0;
    float w = 0.f;
    topk::topk_token<S>(sr.logits, sr.bias, sr.cfg, lane, &id, &w);
    id = min(max(id, 0), E - 1);  // a row of NaN logits has no choice; read inside the weights anyway
    int rank = 0;
    for (int j = 0; j < k; ++j) {
      const int o = __shfl_sync(0xffffffffu, id, j);
      rank += o < id || (o == id && j < lane);
    }
    if (lane < k) {
      s_ids[rank] = id;
      if (writer) sr.ids[lane] = id, sr.weights[lane] = w, sr.slot_row[lane] = rank;
    }
  }
  __syncthreads();
  if (writer) {
    for (int e = tid; e <= E; e += blockDim.x) {
      int below = 0, here = 0;
      for (int j = 0; j < k; ++j) below += s_ids[j] < e, here += s_ids[j] == e;
      sr.offsets[e] = below;
      if (e < E) sr.counts[e] = here;
    }
  }
}

// Self-routed gate|up (one token, bf16; grouped_gemm.h's moe_gate_up_self_routed): every CTA routes (self_route),
// takes the choice of rank blockIdx.y and runs its expert's rows against the token's one X row, output row = that
// rank; CTA (0, 0) writes the routing.
template <int S>
__global__ void __launch_bounds__(kSmallWarps * 32, 7)
    grouped_gemm_small_m_routed_kernel(const __nv_bfloat16* __restrict__ X, const uint8_t* __restrict__ W,
                                       __nv_bfloat16* __restrict__ Y, SelfRoute sr, int E, int N, int K,
                                       int fuse_silu, int rb_per_cta) {
  __shared__ int s_ids[32];
  pdl_wait();  // the logits come from the kernel before; both no-ops unless launched with PDL
  pdl_trigger();
  self_route<S>(sr, E, blockIdx.x == 0 && blockIdx.y == 0, s_ids);
  if (int(blockIdx.y) >= sr.cfg.top_k) return;
  small_m_expert<false, 1, 2>(X, W, nullptr, Y, s_ids[blockIdx.y], 1, int(blockIdx.y), 0, E, N, K, fuse_silu,
                              int(blockIdx.x) * rb_per_cta, rb_per_cta, [] {});
}

// The pair schedule (g_small_m_impl = 2): the legacy kernel with kRB row blocks per warp item (kept as
// a separate kernel so the legacy one compiles exactly as measured; rb_per_cta and N / 16 even).
template <bool kInt8, int NT, int kDepth, int kRB>
__global__ void __launch_bounds__(kSmallWarps * 32, NT == 1 && kDepth == 2 ? 4 : 1)
    grouped_gemm_small_m_pair_kernel(const __nv_bfloat16* __restrict__ X, const uint8_t* __restrict__ W,
                                const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                ExpertRows rows, int E, int N, int K, int fuse_silu, int rb_per_cta,
                                     int prefetch_row_bytes) {
  constexpr int kK = SmallMChunk<kInt8>::kK;
  constexpr int kTok = NT * 8;
  constexpr int kSlots = small_m_slots_rb<NT, kRB>();
  __shared__ float s_red[kSlots][kSmallWarps][kTok][kSmallRows + 1];
  __shared__ int s_done[kSlots];

  pdl_trigger();  // no-ops unless launched with PDL (see common/launch.h)
  pdl_wait();
  const int e = find_active_expert(rows, E, blockIdx.y);
  if (e < 0) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int rb0 = blockIdx.x * rb_per_cta;
  const int n_rb = min(rb_per_cta, N / kSmallRows - rb0);
  const size_t row_bytes = size_t(K) * (kInt8 ? 1 : 2);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
  const int e_w = (e + 1) % E;
#else
  const int e_w = e;
#endif
  if (prefetch_row_bytes > 0) {
    // Fixed cost at T = 1: as soon as the expert is known, ask L2 for the first prefetch_row_bytes of
    // each of the CTA's weight rows (the warps walk K from the start, 4 chunks abreast), so the DRAM
    // round trip overlaps the count reads and the barrier below, and the first items' register loads
    // hit L2. The host sizes it so one launch prefetches at most g_small_m_prefetch_mb (whole rows when
    // the launch's weights fit).
    const uint8_t* p = W + (size_t(e_w) * N + size_t(rb0) * kSmallRows) * row_bytes;
    const int lines = prefetch_row_bytes / 128, n_lines = n_rb * kSmallRows * lines;
    for (int i = tid; i < n_lines; i += kSmallWarps * 32) prefetch_l2(p + size_t(i / lines) * row_bytes + (i % lines) * 128);
  }
  if (tid < kSlots) s_done[tid] = 0;
  __syncthreads();
  const int m = rows.count(e), r0 = rows.begin(e);
  const uint8_t* w_base = W + (size_t(e_w) * N + size_t(rb0) * kSmallRows + g) * row_bytes;
  const int chunks = K / kK;
  const int parts = min(kSmallWarps, chunks);                         // warps holding a K slice
  const int mine = (chunks - warp + kSmallWarps - 1) / kSmallWarps;  // chunks warp, warp+4, ...
  const int total = n_rb / kRB * mine;  // this warp's work: (row block group, chunk) items, one flat stream
  // Items are loaded and computed in order, so each keeps its (group, chunk) position incrementally
  // (no integer division per item, unlike the legacy kernel).
  const size_t group_bytes = size_t(kRB) * kSmallRows * row_bytes;

  for (int pass = 0; pass < m; pass += kTok) {
    const int m_left = m - pass;
    const __nv_bfloat16* x_rows = X + size_t(r0 + pass) * K;
    float acc[kRB][NT][4];
#pragma unroll
    for (int b = 0; b < kRB; ++b)
#pragma unroll
      for (int i = 0; i < NT; ++i) acc[b][i][0] = acc[b][i][1] = acc[b][i][2] = acc[b][i][3] = 0.f;
    const uint8_t* ld_rows = w_base;  // next item to load: its row group and k offset
    int ld_j = 0, ld_k = warp * kK;
    auto load = [&](SmallMChunk<kInt8>(&c)[kRB]) {
#pragma unroll
      for (int b = 0; b < kRB; ++b) c[b].load(ld_rows + size_t(b) * kSmallRows * row_bytes, row_bytes, ld_k, t);
      ld_k += kSmallWarps * kK;
      if (++ld_j == mine) ld_j = 0, ld_k = warp * kK, ld_rows += group_bytes;
    };
    int c_j = 0, c_group = 0, c_k = warp * kK;  // next item to compute

    // Software pipeline over the flat stream: kDepth items of this warp in flight, a slot is
    // refilled right after its MMAs, across row-block boundaries too.
    SmallMChunk<kInt8> buf[kDepth][kRB];
#pragma unroll
    for (int p = 0; p < kDepth; ++p)
      if (p < total) load(buf[p]);
    for (int i = 0; i < total; i += kDepth) {
#pragma unroll
      for (int p = 0; p < kDepth; ++p) {
        const int item = i + p;
        if (item >= total) break;
        small_m_compute_rb<kInt8, NT, kRB>(buf[p], acc, x_rows, K, c_k, t, g, m_left, m_left - 1);
        if (item + kDepth < total) load(buf[p]);
        const int group = c_group;
        c_k += kSmallWarps * kK;
        if (++c_j != mine) continue;
        c_j = 0, c_k = warp * kK, ++c_group;
        // This warp's K slice of row block rb is done: park the partial sums; the last warp of
        // the CTA to get here adds the slices and writes the outputs (no CTA-wide barrier, so
        // the loads already in flight for the next row block keep streaming).
        const int rb_first = group * kRB;
        // Accumulator (row = weight row, col = token): c0,c1 -> (g, 2t..2t+1), c2,c3 -> (g+8, ..).
#pragma unroll
        for (int b = 0; b < kRB; ++b)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            s_red[rb_first + b][warp][nt * 8 + 2 * t][g] = acc[b][nt][0];
            s_red[rb_first + b][warp][nt * 8 + 2 * t + 1][g] = acc[b][nt][1];
            s_red[rb_first + b][warp][nt * 8 + 2 * t][g + 8] = acc[b][nt][2];
            s_red[rb_first + b][warp][nt * 8 + 2 * t + 1][g + 8] = acc[b][nt][3];
            acc[b][nt][0] = acc[b][nt][1] = acc[b][nt][2] = acc[b][nt][3] = 0.f;
          }
        __threadfence_block();
        __syncwarp();
        int prev = 0;
        if (lane == 0) prev = atomicAdd(&s_done[rb_first], 1);
        prev = __shfl_sync(0xffffffffu, prev, 0);
        if (prev != parts - 1) continue;
        __threadfence_block();
        for (int rb = rb_first; rb < rb_first + kRB; ++rb) {
          const int n0 = (rb0 + rb) * kSmallRows;
          auto sum = [&](int tok, int r) {
            float v = 0.f;
            for (int w = 0; w < parts; ++w) v += s_red[rb][w][tok][r];
            if constexpr (kInt8) v *= __ldg(scales + size_t(e_w) * N + n0 + r);
            return v;
          };
          if (!fuse_silu) {
            for (int j = lane; j < kTok * kSmallRows; j += 32) {
              const int tok = j / kSmallRows, r = j % kSmallRows;
              if (tok < m_left) Y[size_t(r0 + pass + tok) * N + n0 + r] = __float2bfloat16_rn(sum(tok, r));
            }
          } else {  // gate/up interleaved by 8 rows: rows r (gate) and r + 8 (up) -> act column n0/2 + r
            for (int j = lane; j < kTok * 8; j += 32) {
              const int tok = j / 8, r = j % 8;
              if (tok < m_left) {
                const float gate = sum(tok, r), up = sum(tok, r + 8);
                Y[size_t(r0 + pass + tok) * (N / 2) + n0 / 2 + r] = __float2bfloat16_rn(__fdividef(gate, 1.f + __expf(-gate)) * up);
              }
            }
          }
        }
        if (lane == 0) s_done[rb_first] = 0;  // ready for the next pass
      }
    }
    __syncthreads();  // the next pass reuses the slots
  }
}

}  // namespace dispatch
