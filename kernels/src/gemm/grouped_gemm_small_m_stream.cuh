// Decode path, "stream" schedule (default since 2026-11-29 17:30 UTC; the older one-expert-per-grid-row
// schedule in grouped_gemm_small_m.cuh stays selectable, g_small_m_impl = 1).
//
// Same math as grouped_gemm_small_m.cuh (weights as the MMA's M side, 16-byte loads straight
// into registers, SmallMChunk / small_m_compute are shared); what changes is who reads what:
//   - The grid is fixed: CTAs per SM (2) x SMs, whatever the routing, so every SM starts streaming
//     at once and no CTA is launched later to fill a second wave.
//   - Work unit = (active expert, 16-row block, token pass): 16 x K weights. Every CTA scans the
//     expert counts once into a shared list (experts with rows, first unit of each), then takes an
//     equal contiguous slice [U*b/G, U*(b+1)/G) of the U units: the bytes per SM differ by at most
//     one unit, for every shape and routing.
//   - Inside a CTA the 8 warps take the slice's (unit, 64- or 128-wide k chunk) items round-robin,
//     kDepth items of loads in flight per warp (16 loads of 16 bytes per lane at depth 4: about
//     128 KB in flight per SM), across unit and round boundaries.
//   - Split-K reduction inside the CTA only, deterministic: each warp parks its partial sums of a
//     unit in shared memory, and every kSlots units (a round) one barrier, then all threads add
//     the 8 partials in warp order, scale (int8), optionally apply SiLU-and-multiply, and store.
//     Two slot buffers, so a round's reduction overlaps the next round's parking; the loads already
//     issued keep flowing across the barrier. No global workspace, no atomics.
// The barrier is the non-aligned bar.sync: warps reach it from different loop iterations.
//
// Legend: E experts, N outputs, K inputs, U work units, G CTAs, C k-chunks per unit, S units per round.
#pragma once
#include "grouped_gemm_small_m.cuh"

namespace dispatch {

constexpr int kStreamWarps = 8;
constexpr int kStreamMaxExperts = 512;

template <int NT>
struct StreamCfg {
  static constexpr int kTok = NT * 8;
  static constexpr int kSlots = NT == 1 ? 4 : NT == 2 ? 2 : 1;               // S
  static constexpr int kSlotFloats = kStreamWarps * kTok * (kSmallRows + 1);  // [warp][tok][row]
  static constexpr int kSmemBytes = 2 * kSlots * kSlotFloats * 4;             // two round buffers
};

__device__ __forceinline__ void cta_barrier() { asm volatile("barrier.sync 0;\n" ::: "memory"); }

// Routing reads: plain loads through L2 (not the read-only path), so they are also correct when the
// kernel is launched with PDL and the counts were written by the grid it overlaps.
__device__ __forceinline__ int stream_count(const ExpertRows& rows, int e) {
  return rows.offsets ? __ldcg(rows.offsets + e + 1) - __ldcg(rows.offsets + e) : __ldcg(rows.counts + e);
}
__device__ __forceinline__ int stream_begin(const ExpertRows& rows, int e) {
  return rows.offsets ? __ldcg(rows.offsets + e) : e * rows.cap;
}

// Active-expert list in shared memory: s_e[a], s_first[a] (first unit), s_row0[a], s_cnt[a] for
// a < n, s_first[n] = U. Units of expert a: nb row blocks x passes(a), pass fastest. Returns U.
template <int kTok>
__device__ __forceinline__ int stream_scan(const ExpertRows& rows, int E, int nb, int* s_e, int* s_first,
                                           int* s_row0, int* s_cnt, int* s_warp) {
  constexpr int kThreads = kStreamWarps * 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int per = (E + kThreads - 1) / kThreads;  // <= 2 (E <= 512, checked on the host)
  int cnt[2], act = 0, units = 0;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = tid * per + i;
    cnt[i] = i < per && e < E ? stream_count(rows, e) : 0;
    act += cnt[i] > 0;
    units += cnt[i] > 0 ? nb * ((cnt[i] + kTok - 1) / kTok) : 0;
  }
  int ia = act, iu = units;  // inclusive warp scan
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int a = __shfl_up_sync(0xffffffffu, ia, o), u = __shfl_up_sync(0xffffffffu, iu, o);
    if (lane >= o) ia += a, iu += u;
  }
  if (lane == 31) s_warp[warp] = ia, s_warp[kStreamWarps + warp] = iu;
  cta_barrier();
  int a = ia - act, u = iu - units, n = 0, total = 0;
#pragma unroll
  for (int w = 0; w < kStreamWarps; ++w) {
    if (w < warp) a += s_warp[w], u += s_warp[kStreamWarps + w];
    n += s_warp[w];
    total += s_warp[kStreamWarps + w];
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (cnt[i] <= 0) continue;
    const int e = tid * per + i;
    s_e[a] = e, s_first[a] = u, s_row0[a] = stream_begin(rows, e), s_cnt[a] = cnt[i];
    ++a;
    u += nb * ((cnt[i] + kTok - 1) / kTok);
  }
  if (tid == 0) s_first[n] = total;
  cta_barrier();
  return total;
}

// Decodes unit u (monotonic per caller: the cursor only moves forward).
struct StreamUnit {
  int e, rb, row0, m_left;  // expert, row block, first X/Y row of the pass, rows left from there
};
template <int kTok>
__device__ __forceinline__ StreamUnit stream_unit(int u, int& cursor, const int* s_e, const int* s_first,
                                                  const int* s_row0, const int* s_cnt) {
  while (s_first[cursor + 1] <= u) ++cursor;
  const int a = cursor, cnt = s_cnt[a], passes = (cnt + kTok - 1) / kTok, local = u - s_first[a];
  const int rb = local / passes, pass = local - rb * passes;
  return StreamUnit{s_e[a], rb, s_row0[a] + pass * kTok, cnt - pass * kTok};
}

template <bool kInt8, int NT, int kDepth>
__global__ void __launch_bounds__(kStreamWarps * 32, 2)
    grouped_gemm_small_m_stream_kernel(const __nv_bfloat16* __restrict__ X, const uint8_t* __restrict__ W,
                                       const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                       ExpertRows rows, int E, int N, int K, int fuse_silu) {
  using Cfg = StreamCfg<NT>;
  constexpr int kTok = Cfg::kTok, S = Cfg::kSlots, kK = SmallMChunk<kInt8>::kK, kW = kStreamWarps;
  constexpr int kRow = kSmallRows + 1;
  extern __shared__ float s_red[];  // [2][S][warp][tok][kRow]
  __shared__ int s_e[kStreamMaxExperts], s_first[kStreamMaxExperts + 1], s_row0[kStreamMaxExperts],
      s_cnt[kStreamMaxExperts], s_warp[2 * kStreamWarps];

  pdl_trigger();  // no-ops unless launched with PDL
  pdl_wait();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  for (int i = tid; i < 2 * S * Cfg::kSlotFloats; i += kW * 32) s_red[i] = 0.f;
  const int nb = N / kSmallRows, C = K / kK;
  const int U = stream_scan<kTok>(rows, E, nb, s_e, s_first, s_row0, s_cnt, s_warp);  // barrier inside
  const int u0 = int((long long)blockIdx.x * U / gridDim.x);
  const int nu = int((long long)(blockIdx.x + 1) * U / gridDim.x) - u0;
  if (nu <= 0) return;  // CTA-uniform
  const int n_rounds = (nu + S - 1) / S;
  const int mine = nu * C > warp ? (nu * C - warp + kW - 1) / kW : 0;  // items j = warp + i * kW
  const size_t row_bytes = size_t(K) * (kInt8 ? 1 : 2);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
  auto w_expert = [&](int e) { return (e + 1) % E; };
#else
  auto w_expert = [](int e) { return e; };
#endif

  // Two walks over this warp's items j = warp, warp + 8, ...: the loads run kDepth items ahead of
  // the MMAs. Each keeps (lu, c) = (unit in the slice, k chunk) incrementally and decodes a unit
  // (cursor walk, one division) only when lu changes, keeping just what it needs.
  struct Walk {
    int lu, c, dec_lu, cursor;
  };
  auto step = [&](Walk& wk) {
    wk.c += kW;
    while (wk.c >= C) wk.c -= C, ++wk.lu;
  };
  Walk ld{warp / C, warp % C, -1, 0}, cp = ld;
  const uint8_t* w_rows = W;  // load walk's unit: row g of its 16-row block
  int x_row0 = 0, m_left = 0;  // compute walk's unit: first X row of the pass, rows left
  int red_cur = 0;
  auto load_next = [&](SmallMChunk<kInt8>& b) {  // loads item (ld.lu, ld.c), then steps ld
    if (ld.dec_lu != ld.lu) {
      const StreamUnit su = stream_unit<kTok>(u0 + ld.lu, ld.cursor, s_e, s_first, s_row0, s_cnt);
      w_rows = W + (size_t(w_expert(su.e)) * N + size_t(su.rb) * kSmallRows + g) * row_bytes;
      ld.dec_lu = ld.lu;
    }
    b.load(w_rows, row_bytes, ld.c * kK, t);
    step(ld);
  };

  // Round r's reduction: all threads, after the barrier; zeroes the cells it read.
  auto round_end = [&](int r) {
    cta_barrier();
    float* red = s_red + (r & 1) * S * Cfg::kSlotFloats;
    const int n_here = min(S, nu - r * S);
    const int per_slot = kTok * (fuse_silu ? 4 : 8);  // threads' items: 2 output columns each
    for (int idx = tid; idx < n_here * per_slot; idx += kW * 32) {
      const int slot = idx / per_slot, rem = idx - slot * per_slot;
      const int tok = fuse_silu ? rem >> 2 : rem >> 3, q = fuse_silu ? rem & 3 : rem & 7;
      const StreamUnit su = stream_unit<kTok>(u0 + r * S + slot, red_cur, s_e, s_first, s_row0, s_cnt);
      const int e_w = w_expert(su.e), n0 = su.rb * kSmallRows;
      float* cell = red + slot * Cfg::kSlotFloats + tok * kRow;
      auto sum = [&](int row) {
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < kW; ++w) {
          v += cell[w * kTok * kRow + row];
          cell[w * kTok * kRow + row] = 0.f;
        }
        if constexpr (kInt8) v *= __ldg(scales + size_t(e_w) * N + n0 + row);
        return v;
      };
      const bool valid = tok < su.m_left;
      if (!fuse_silu) {
        const float v0 = sum(2 * q), v1 = sum(2 * q + 1);
        if (valid)
          *reinterpret_cast<uint32_t*>(Y + size_t(su.row0 + tok) * N + n0 + 2 * q) = pack_bf16x2(v0, v1);
      } else {  // gate/up interleaved by 8 rows: rows r (gate) and r + 8 (up) -> column n0/2 + r
        float o[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float gate = sum(2 * q + h), up = sum(2 * q + h + 8);
          o[h] = __fdividef(gate, 1.f + __expf(-gate)) * up;
        }
        if (valid)
          *reinterpret_cast<uint32_t*>(Y + size_t(su.row0 + tok) * (N / 2) + n0 / 2 + 2 * q) = pack_bf16x2(o[0], o[1]);
      }
    }
  };

  float acc[NT][4];
#pragma unroll
  for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  SmallMChunk<kInt8> buf[kDepth];
#pragma unroll
  for (int p = 0; p < kDepth; ++p)
    if (p < mine) load_next(buf[p]);
  int rounds_done = 0;
  for (int i = 0; i < mine; i += kDepth) {
#pragma unroll
    for (int p = 0; p < kDepth; ++p) {
      const int it = i + p;
      if (it >= mine) break;  // warp-uniform
      const int lu = cp.lu, c = cp.c, r = lu / S;  // S is a power of two
      while (rounds_done < r) round_end(rounds_done++);
      if (cp.dec_lu != lu) {
        const StreamUnit su = stream_unit<kTok>(u0 + lu, cp.cursor, s_e, s_first, s_row0, s_cnt);
        x_row0 = su.row0, m_left = su.m_left, cp.dec_lu = lu;
      }
      small_m_compute<kInt8, NT>(buf[p], acc, X + size_t(x_row0) * K, K, c * kK, t, g, m_left, m_left - 1);
      if (it + kDepth < mine) load_next(buf[p]);
      step(cp);
      if (cp.lu == lu) continue;
      // This warp's last chunk of unit lu: park its partial sums (row = weight row, col = token;
      // c0,c1 -> (g, 2t..2t+1), c2,c3 -> (g+8, ..)).
      float* cell = s_red + ((r & 1) * S + (lu - r * S)) * Cfg::kSlotFloats + warp * kTok * kRow;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        cell[(nt * 8 + 2 * t) * kRow + g] = acc[nt][0];
        cell[(nt * 8 + 2 * t + 1) * kRow + g] = acc[nt][1];
        cell[(nt * 8 + 2 * t) * kRow + g + 8] = acc[nt][2];
        cell[(nt * 8 + 2 * t + 1) * kRow + g + 8] = acc[nt][3];
        acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
      }
    }
  }
  while (rounds_done < n_rounds) round_end(rounds_done++);
}

}  // namespace dispatch
