// Device kernels of the NVLink peer-write backend (see ep_p2p_kernels.cuh for the buffers and
// the ordering argument). Rows move as 16-byte vectors, four loads in flight per thread; sums are
// fp32 in the same order as ep_kernels.cu (ascending expert id; ascending rank).
#include <cuda_bf16.h>
#include <cstdio>
#include "check.h"
#include "ep_device.cuh"
#include "ep_p2p_kernels.cuh"

namespace dispatch::ep {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T>
__device__ __forceinline__ T* at(char* base, size_t off) {
  return reinterpret_cast<T*>(base + off);
}
__device__ __forceinline__ const uint4* vecRow(const void* base, long row, int H) {
  return reinterpret_cast<const uint4*>(base) + row * (H / 8);
}
__device__ __forceinline__ uint4* vecRow(void* base, long row, int H) { return reinterpret_cast<uint4*>(base) + row * (H / 8); }

__device__ __forceinline__ void stReleaseSys(int* p, int v) {
  asm volatile("st.release.sys.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int ldAcquireSys(const int* p) {
  int v;
  asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void redAddReleaseSys(unsigned long long* p, unsigned long long v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ldAcquireSys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long nowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// n 16-byte vectors from s to d (d may be a peer's memory), worker `lane` of `width`.
__device__ __forceinline__ void copyVecs(const uint4* __restrict__ s, uint4* __restrict__ d, int n, int lane, int width) {
  int v = lane;
  for (; v + 3 * width < n; v += 4 * width) {
    const uint4 a = __ldg(s + v), b = __ldg(s + v + width), c = __ldg(s + v + 2 * width), e = __ldg(s + v + 3 * width);
    d[v] = a;
    d[v + width] = b;
    d[v + 2 * width] = c;
    d[v + 3 * width] = e;
  }
  for (; v < n; v += width) d[v] = __ldg(s + v);
}

__device__ __forceinline__ void addScaled(float acc[8], uint4 v, float w) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    acc[2 * i] += w * f.x;
    acc[2 * i + 1] += w * f.y;
  }
}
__device__ __forceinline__ uint4 packBf16(const float acc[8]) {
  uint4 r;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
  return r;
}

__device__ __forceinline__ int servingRank(const DevPlacement& p, int e, int src, int t) {
  const int n = p.num_rep[e];
  return n == 1 ? p.rep[e * p.max_rep] : p.rep[e * p.max_rep + (src + t) % n];
}

// Called by every thread of every block at the end of a send kernel. The last block to finish
// runs before_signal (stores still to publish), then raises `kind`'s flag on every peer with
// this rank's next epoch. Each block's peer stores are fenced (system scope) before it counts
// itself done, so the flag is ordered after all of them.
template <typename F>
__device__ void finishAndSignal(P2pKind kind, const P2pShape& sh, const P2pSync& sy, F&& before_signal) {
  __shared__ bool last;
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(sy.done + kind, 1) == int(gridDim.x * gridDim.y) - 1;
  __syncthreads();
  if (!last) return;
  before_signal();
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    sy.done[kind] = 0;
    const int e = int(unsigned(sy.epoch[kind]) + 1u);  // wraps after 2^32 exchanges; waitKernel compares wrap-safe
    sy.epoch[kind] = e;
    __threadfence_system();
    for (int d = 0; d < sh.N; ++d) stReleaseSys(at<int>(sy.peers[d], sh.off.sig) + kind * sh.N + sh.me, e);
  }
}

// Spin phase of the fused waits: poll without sleeping for this long (an exchange normally
// completes within a few microseconds), then sleep 128 ns between polls.
constexpr unsigned long long kSpinNs = 20000;

__device__ __forceinline__ unsigned long long* llSig(char* base, const P2pShape& sh, int q) {
  return at<unsigned long long>(base, sh.off.ll_sig) + q * sh.N;
}

// Fused low-latency path, every thread of every block at the end of a send kernel of exchange q
// (0 dispatch, 1 combine): the block's peer stores are fenced at system scope by each thread that
// made them, then (after the barrier, so the release is cumulative over the whole block) one
// thread per rank d adds this block's share to d's ll_sig[q][me]. The kernel's shares sum to
// kLlShare, so a source's word on d reaches epoch * kLlShare only once every block has signalled.
__device__ __forceinline__ void signalShare(int q, const P2pShape& sh, const P2pSync& sy) {
  const unsigned G = gridDim.x * gridDim.y, b = blockIdx.y * gridDim.x + blockIdx.x;
  const unsigned long long share = b == 0 ? kLlShare - (G - 1) : 1ull;
  __threadfence_system();
  __syncthreads();
  for (int d = threadIdx.x; d < sh.N; d += blockDim.x) redAddReleaseSys(llSig(sy.peers[d], sh, q) + sh.me, share);
}

// Fused low-latency path, every thread of one block: returns once every source's ll_sig[q] word
// reached epoch * kLlShare (acquire, system scope; then a block barrier, so every thread of the
// block sees what the sources stored before signalling). Traps after timeout_ns; `report` blocks
// print which rank is missing first (the others wait a second longer, so one message comes out).
__device__ __forceinline__ void waitShares(int q, const P2pShape& sh, const P2pSync& sy, unsigned long long epoch,
                                           unsigned long long timeout_ns, bool report) {
  const unsigned long long* sig = llSig(sy.self, sh, q);
  const unsigned long long target = epoch * kLlShare;
  if (!report) timeout_ns += 1000000000ull;
  for (int p = threadIdx.x; p < sh.N; p += blockDim.x) {
    const unsigned long long t0 = nowNs();
    while (ldAcquireSys(sig + p) < target) {
      const unsigned long long dt = nowNs() - t0;
      if (dt < kSpinNs) continue;
      if (dt > timeout_ns) {
        if (report)
          printf("native-ep p2p: rank %d waited %llu s for rank %d (low-latency %s, exchange %llu)\n", sh.me,
                 timeout_ns / 1000000000ull, p, q == 0 ? "dispatch" : "combine", epoch);
        __trap();
      }
      __nanosleep(128);
    }
  }
  __syncthreads();
}

// grid max(T, 1): block t, one warp per slot. kFused: block 0 then waits for every source's rows,
// publishes the clamped counts in ll_rows and zeroes ll_cnt (see the header's ordering notes).
template <bool kFused>
__global__ void __launch_bounds__(kThreads) llSendKernel(const void* x, const int32_t* ids, int T, DevPlacement p, P2pShape sh,
                                                          P2pSync sy, uint8_t* slot_ok, unsigned long long timeout_ns) {
  const int t = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cap = sh.N * sh.maxT;
  if (t < T) {
    for (int j = warp; j < sh.k; j += kWarps) {
      const int s = t * sh.k + j;
      int d = -1, le = -1, pos = -1;
      if (lane == 0) {
        const int e = ids[s];
        if (e >= 0 && e < p.E) {
          d = servingRank(p, e, sh.me, t);
          le = p.local_index[d * p.E + e];
        }
        if (le >= 0) {
          pos = atomicAdd_system(at<int>(sy.peers[d], sh.off.ll_cnt) + le, 1);
          if (pos >= cap) pos = -1;  // only with a repeated expert in one token (routers never emit it)
          else at<int>(sy.peers[d], sh.off.ll_meta)[le * cap + pos] = sh.me * sh.maxT * sh.k + s;
        }
        slot_ok[s] = pos >= 0;
      }
      d = __shfl_sync(0xffffffffu, d, 0);
      le = __shfl_sync(0xffffffffu, le, 0);
      pos = __shfl_sync(0xffffffffu, pos, 0);
      if (pos >= 0)
        copyVecs(vecRow(x, t, sh.H), vecRow(sy.peers[d] + sh.off.ll_x, long(le) * cap + pos, sh.H), sh.H / 8, lane, 32);
    }
  }
  if constexpr (!kFused) {
    finishAndSignal(kLlDispatch, sh, sy, [] {});
  } else {
    signalShare(0, sh, sy);
    if (blockIdx.x != 0) return;
    // Every source's blocks (this rank's included) have taken their positions with atomics on
    // ll_cnt and fenced them before their shares: after the wait ll_cnt is final. Peers next add to
    // ll_cnt in their next dispatch, which starts only after they see this rank's combine shares,
    // raised by a later kernel on this stream: zeroing here is ordered before those atomics.
    const unsigned long long e = *sy.ll_epoch + 1;
    waitShares(0, sh, sy, e, timeout_ns, true);
    int* cnt = at<int>(sy.self, sh.off.ll_cnt);
    for (int le = threadIdx.x; le < sh.LeMax; le += blockDim.x) {
      const int c = __ldcg(cnt + le);
      sy.ll_rows[le] = c < cap ? c : cap;  // > cap only with a repeated expert in one token
      cnt[le] = 0;
    }
    if (threadIdx.x == 0) *sy.ll_epoch = e;  // every thread read it before waitShares' barrier
  }
}

__global__ void waitKernel(P2pKind kind, P2pShape sh, P2pSync sy, int Le, unsigned long long timeout_ns) {
  const int e = sy.epoch[kind];
  const int* sig = at<int>(sy.self, sh.off.sig) + kind * sh.N;
  for (int p = threadIdx.x; p < sh.N; p += blockDim.x) {
    const unsigned long long t0 = nowNs();
    while (int(unsigned(ldAcquireSys(sig + p)) - unsigned(e)) < 0) {  // wrap-safe sig < e
      if (nowNs() - t0 > timeout_ns) {
        printf("native-ep p2p: rank %d waited %llu s for rank %d (exchange kind %d, epoch %d)\n", sh.me, timeout_ns / 1000000000ull,
               p, int(kind), e);
        __trap();
      }
      __nanosleep(128);
    }
  }
  __syncthreads();
  if (kind == kLlDispatch) {
    int* cnt = at<int>(sy.self, sh.off.ll_cnt);
    const int cap = sh.N * sh.maxT;
    for (int le = threadIdx.x; le < Le; le += blockDim.x)
      if (cnt[le] > cap) cnt[le] = cap;
  }
}

// grid (max(Le, 1), splits): warps stride over expert le's received rows. Rows per expert: kFused
// ll_rows (the dispatch's clamped copy), else ll_cnt (clamped by the wait kernel, zeroed here).
template <bool kFused>
__global__ void __launch_bounds__(kThreads) llCombineSendKernel(const void* ys, int Le, P2pShape sh, P2pSync sy) {
  const int le = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cap = sh.N * sh.maxT, per_src = sh.maxT * sh.k;
  int* cnt = at<int>(sy.self, sh.off.ll_cnt);
  const int* rows = kFused ? sy.ll_rows : cnt;
  const int* meta = at<int>(sy.self, sh.off.ll_meta);
  if (le < Le) {
    const int n = rows[le];
    for (int i = blockIdx.y * kWarps + warp; i < n; i += gridDim.y * kWarps) {
      const int m = meta[le * cap + i];
      const int src = m / per_src, slot = m % per_src;
      copyVecs(vecRow(ys, long(le) * cap + i, sh.H), vecRow(sy.peers[src] + sh.off.ll_back, slot, sh.H), sh.H / 8, lane, 32);
    }
  }
  if constexpr (kFused) {
    signalShare(1, sh, sy);
  } else {
    finishAndSignal(kLlCombine, sh, sy, [&] {
      for (int q = threadIdx.x; q < sh.LeMax; q += blockDim.x) cnt[q] = 0;
    });
  }
}

// grid T (kFused: max(T, 1)): block t reduces its k returned rows. kFused: every block first waits
// for every source's combine shares of this rank's current low-latency exchange (ll_epoch, set by
// the dispatch before it on this stream); block t >= T only waits.
template <bool kFused>
__global__ void __launch_bounds__(kThreads) llReduceKernel(const int32_t* ids, const float* w, const uint8_t* ok, int T,
                                                            P2pShape sh, P2pSync sy, void* out, unsigned long long timeout_ns) {
  __shared__ int keys[kMaxK];
  __shared__ int order[kMaxK];
  const int t = blockIdx.x, k = sh.k;
  if constexpr (kFused) {
    waitShares(1, sh, sy, *sy.ll_epoch, timeout_ns, t == 0);
    if (t >= T) return;
  }
  if (threadIdx.x < k) keys[threadIdx.x] = ok[t * k + threadIdx.x] ? ids[t * k + threadIdx.x] : -1;
  __syncthreads();
  const int n = sortSlots(keys, k, order);
  const char* back = sy.self + sh.off.ll_back;
  for (int v = threadIdx.x; v < sh.H / 8; v += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < n; ++q) {
      const int s = t * k + order[q];
      addScaled(acc, vecRow(back, s, sh.H)[v], w[s]);
    }
    vecRow(out, t, sh.H)[v] = packBf16(acc);
  }
}

// grid-stride over tokens; block per token.
__global__ void __launch_bounds__(kThreads) htSendKernel(const void* x, const int32_t* ids, const float* w, const int* slot_rank,
                                                          const int* pos, const int* tokens_per_rank, int T, DevPlacement p,
                                                          P2pShape sh, P2pSync sy) {
  const int k = sh.k, N = sh.N;
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    for (int d = 0; d < N; ++d) {
      const int P = pos[t * N + d];
      if (P < 0) continue;
      const long row = long(sh.me) * sh.Tht + P;
      char* base = sy.peers[d];
      copyVecs(vecRow(x, t, sh.H), vecRow(base + sh.off.ht_x, row, sh.H), sh.H / 8, threadIdx.x, blockDim.x);
      if (threadIdx.x < k) {
        const int s = t * k + threadIdx.x;
        at<int>(base, sh.off.ht_le)[row * k + threadIdx.x] = slot_rank[s] == d ? p.local_index[d * p.E + ids[s]] : -1;
        at<float>(base, sh.off.ht_w)[row * k + threadIdx.x] = w[s];
      }
    }
  }
  finishAndSignal(kHtDispatch, sh, sy, [&] {
    for (int d = threadIdx.x; d < N; d += blockDim.x) at<int>(sy.peers[d], sh.off.ht_cnt)[sh.me] = tokens_per_rank[d];
  });
}

__global__ void htCountKernel(int Le, P2pShape sh, P2pSync sy, int* counts) {
  extern __shared__ int hist[];
  for (int e = threadIdx.x; e < Le; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  const int* cnt = at<int>(sy.self, sh.off.ht_cnt);
  const int* le_of = at<int>(sy.self, sh.off.ht_le);
  const long per_src = long(sh.Tht) * sh.k, total = per_src * sh.N;
  for (long f = long(blockIdx.x) * blockDim.x + threadIdx.x; f < total; f += long(gridDim.x) * blockDim.x) {
    const int s = int(f / per_src), i = int(f % per_src) / sh.k;
    if (i >= cnt[s]) continue;
    const int le = le_of[f];
    if (le >= 0 && le < Le) atomicAdd(hist + le, 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < Le; e += blockDim.x)
    if (hist[e]) atomicAdd(counts + e, hist[e]);
}

__global__ void htScanKernel(const int* counts, int Le, int align, int* offsets, int* next) {
  int at_row = 0;  // Le is small (experts of one rank): a serial scan is enough
  for (int e = 0; e < Le; ++e) {
    offsets[e] = at_row;
    next[e] = at_row;
    at_row += (counts[e] + align - 1) / align * align;
  }
  offsets[Le] = at_row;
}

// grid-stride over receive slots r in [0, N*Tht); block per received token.
__global__ void __launch_bounds__(kThreads) htScatterKernel(P2pShape sh, P2pSync sy, int* next, int* row_of, void* xs) {
  __shared__ int rows[kMaxK];
  const int k = sh.k;
  const int* cnt = at<int>(sy.self, sh.off.ht_cnt);
  const int* le_of = at<int>(sy.self, sh.off.ht_le);
  const char* recv = sy.self + sh.off.ht_x;
  for (long r = blockIdx.x; r < long(sh.N) * sh.Tht; r += gridDim.x) {
    if (r % sh.Tht >= cnt[r / sh.Tht]) continue;  // the same for the whole block
    __syncthreads();
    if (threadIdx.x < k) {
      const int le = le_of[r * k + threadIdx.x];
      rows[threadIdx.x] = le >= 0 ? atomicAdd(next + le, 1) : -1;
      row_of[r * k + threadIdx.x] = rows[threadIdx.x];
    }
    __syncthreads();
    for (int j = 0; j < k; ++j)
      if (rows[j] >= 0) copyVecs(vecRow(recv, r, sh.H), vecRow(xs, rows[j], sh.H), sh.H / 8, threadIdx.x, blockDim.x);
  }
}

// grid-stride over receive slots; block per received token: weighted local partial to the source.
__global__ void __launch_bounds__(kThreads) htCombineSendKernel(const void* ys, const int* row_of, const int* l2g, P2pShape sh,
                                                                 P2pSync sy) {
  __shared__ int keys[kMaxK];
  __shared__ int order[kMaxK];
  const int k = sh.k;
  const int* cnt = at<int>(sy.self, sh.off.ht_cnt);
  const int* le_of = at<int>(sy.self, sh.off.ht_le);
  const float* w_of = at<float>(sy.self, sh.off.ht_w);
  for (long r = blockIdx.x; r < long(sh.N) * sh.Tht; r += gridDim.x) {
    const int s = int(r / sh.Tht), i = int(r % sh.Tht);
    if (i >= cnt[s]) continue;
    __syncthreads();
    if (threadIdx.x < k) {
      const int le = le_of[r * k + threadIdx.x];
      keys[threadIdx.x] = le >= 0 ? l2g[le] : -1;
    }
    __syncthreads();
    const int n = sortSlots(keys, k, order);
    uint4* dst = vecRow(sy.peers[s] + sh.off.ht_back, long(sh.me) * sh.Tht + i, sh.H);
    for (int v = threadIdx.x; v < sh.H / 8; v += blockDim.x) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int q = 0; q < n; ++q) {
        const int j = order[q];
        addScaled(acc, __ldg(vecRow(ys, row_of[r * k + j], sh.H) + v), w_of[r * k + j]);
      }
      dst[v] = packBf16(acc);
    }
  }
  finishAndSignal(kHtCombine, sh, sy, [] {});
}

// grid T: out[t] = sum over ranks ascending of the partial each returned.
__global__ void __launch_bounds__(kThreads) htSumKernel(const int* pos, P2pShape sh, P2pSync sy, void* out) {
  const int t = blockIdx.x;
  const char* back = sy.self + sh.off.ht_back;
  for (int v = threadIdx.x; v < sh.H / 8; v += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int d = 0; d < sh.N; ++d) {
      const int P = pos[t * sh.N + d];
      if (P >= 0) addScaled(acc, vecRow(back, long(d) * sh.Tht + P, sh.H)[v], 1.f);
    }
    vecRow(out, t, sh.H)[v] = packBf16(acc);
  }
}

void checkShape(const P2pShape& sh) {
  EP_CHECK(sh.H % 8 == 0 && sh.k >= 1 && sh.k <= kMaxK, "H must be a multiple of 8 and 1 <= k <= 32");
}

}  // namespace

static unsigned long long timeoutNs(int timeout_s) { return (unsigned long long)timeout_s * 1000000000ull; }

void launchLlSendP2p(const void* x, const int32_t* ids, int T, DevPlacement p, P2pShape sh, P2pSync sy, uint8_t* slot_ok,
                     int timeout_s, cudaStream_t s) {
  checkShape(sh);
  EP_CHECK(T >= 0 && T <= sh.maxT, "T exceeds the low-latency capacity");
  EP_CHECK((unsigned long long)sh.maxT <= kLlShare, "max_tokens_ll exceeds the low-latency share quantum");
  const int grid = T > 0 ? T : 1;
  if (sy.ll_fused) llSendKernel<true><<<grid, kThreads, 0, s>>>(x, ids, T, p, sh, sy, slot_ok, timeoutNs(timeout_s));
  else llSendKernel<false><<<grid, kThreads, 0, s>>>(x, ids, T, p, sh, sy, slot_ok, 0);
  EP_CUDA(cudaGetLastError());
}

void launchWaitP2p(P2pKind kind, P2pShape sh, P2pSync sy, int Le, int timeout_s, cudaStream_t s) {
  waitKernel<<<1, 128, 0, s>>>(kind, sh, sy, Le, timeoutNs(timeout_s));
  EP_CUDA(cudaGetLastError());
}

void launchLlCombineSendP2p(const void* ys, int Le, P2pShape sh, P2pSync sy, cudaStream_t s) {
  checkShape(sh);
  // Several blocks per expert: a rank's expert holds ~T*k*N/E rows on average, more when skewed.
  const dim3 grid(Le > 0 ? Le : 1, 4);
  EP_CHECK((unsigned long long)grid.x * grid.y <= kLlShare, "too many local experts for the low-latency share quantum");
  if (sy.ll_fused) llCombineSendKernel<true><<<grid, kThreads, 0, s>>>(ys, Le, sh, sy);
  else llCombineSendKernel<false><<<grid, kThreads, 0, s>>>(ys, Le, sh, sy);
  EP_CUDA(cudaGetLastError());
}

void launchLlReduceP2p(const int32_t* ids, const float* w, const uint8_t* slot_ok, int T, P2pShape sh, P2pSync sy, void* out,
                       int timeout_s, cudaStream_t s) {
  if (sy.ll_fused) {
    llReduceKernel<true><<<T > 0 ? T : 1, kThreads, 0, s>>>(ids, w, slot_ok, T, sh, sy, out, timeoutNs(timeout_s));
  } else {
    if (T == 0) return;
    llReduceKernel<false><<<T, kThreads, 0, s>>>(ids, w, slot_ok, T, sh, sy, out, 0);
  }
  EP_CUDA(cudaGetLastError());
}

void launchHtSendP2p(const void* x, const int32_t* ids, const float* w, const int* slot_rank, const int* pos,
                     const int* tokens_per_rank, int T, DevPlacement p, P2pShape sh, P2pSync sy, cudaStream_t s) {
  checkShape(sh);
  EP_CHECK(T >= 0 && T <= sh.Tht, "T exceeds max_tokens_ht");
  const int grid = T < 1 ? 1 : (T < 8192 ? T : 8192);
  htSendKernel<<<grid, kThreads, 0, s>>>(x, ids, w, slot_rank, pos, tokens_per_rank, T, p, sh, sy);
  EP_CUDA(cudaGetLastError());
}

void launchHtExpandP2p(int Le, int align, P2pShape sh, P2pSync sy, int* counts, int* offsets, int* next, int* row_of, void* xs,
                       cudaStream_t s) {
  EP_CHECK(Le <= 12 * 1024, "too many local experts for the shared-memory histogram");
  EP_CUDA(cudaMemsetAsync(counts, 0, sizeof(int) * (Le > 0 ? Le : 1), s));
  htCountKernel<<<264, 512, sizeof(int) * (Le > 0 ? Le : 1), s>>>(Le, sh, sy, counts);
  EP_CUDA(cudaGetLastError());
  htScanKernel<<<1, 1, 0, s>>>(counts, Le, align, offsets, next);
  EP_CUDA(cudaGetLastError());
  const long slots = long(sh.N) * sh.Tht;
  htScatterKernel<<<slots < 8192 ? int(slots) : 8192, kThreads, 0, s>>>(sh, sy, next, row_of, xs);
  EP_CUDA(cudaGetLastError());
}

void launchHtCombineSendP2p(const void* ys, const int* row_of, const int* l2g, P2pShape sh, P2pSync sy, cudaStream_t s) {
  const long slots = long(sh.N) * sh.Tht;
  htCombineSendKernel<<<slots < 8192 ? int(slots) : 8192, kThreads, 0, s>>>(ys, row_of, l2g, sh, sy);
  EP_CUDA(cudaGetLastError());
}

void launchHtSumP2p(const int* pos, int T, P2pShape sh, P2pSync sy, void* out, cudaStream_t s) {
  if (T == 0) return;
  htSumKernel<<<T, kThreads, 0, s>>>(pos, sh, sy, out);
  EP_CUDA(cudaGetLastError());
}

}  // namespace dispatch::ep
