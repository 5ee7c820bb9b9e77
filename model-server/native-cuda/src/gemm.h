// Path selection for the dense GEMM (ops.h's gemm() picks Auto). The timing harness
// (scripts/gemm_bench.cu) and A/B runs name a path explicitly.
#pragma once
#include "ops.h"

namespace dcuda {

enum class GemmPath {
  Auto,    // GEMV at T <= 8, Stream at 9 <= T <= 64 (gemm_stream_mode(); Skinny, or SkinnyAsync
           // under DISPATCH_CUDA_GEMM_SKINNY=async, when it is off), tiled above (Legacy for
           // T > 8 when DISPATCH_CUDA_GEMM_LEGACY=1); Skinny2 at every T <= 64 when
           // DISPATCH_CUDA_GEMM_SKINNY2=1; Wgmma at T > 64 when DISPATCH_CUDA_GEMM_WGMMA=1
  Gemv,    // T <= 8 only
  Legacy,  // the WMMA 64x64 tiles with split-K (any T > 0)
  Skinny,       // T <= 64, K % 8 == 0, 16-byte aligned X and W (W through registers)
  SkinnyAsync,  // same conditions, W through a cp.async shared-memory ring
  Stream,       // T <= 64, same conditions: gemm_stream.cuh (cp.async ring, cluster split-K, deterministic)
  Tiled,      // 128x128 tiles; K % 8 == 0, 16-byte aligned X and W
  TiledWide,  // 128x256 tiles (A/B against Tiled); same conditions
  Skinny2,    // T <= 64, K % 8 == 0, 16-byte aligned X and W: gemm_skinny2.cuh (TMA ring + wgmma,
              // cluster split-K, deterministic)
  Wgmma,      // any T (meant for T > 64), K % 8 == 0, 16-byte aligned X and W: gemm_wgmma_tiled.cuh
              // (TMA ring + wgmma, 128 x 256 or 128 x 128 tiles, persistent, no split K); splits
              // 128 or 256 forces the tile width
};

// True when DISPATCH_CUDA_GEMM_LEGACY=1: T > 8 takes the WMMA tiles.
bool gemm_legacy();

// Where Auto uses GemmPath::Stream, from DISPATCH_CUDA_SKINNY_V2: 0 nowhere ("0"), 1 at
// 9 <= T <= 64 (unset or "1", the default), 2 at 1 <= T <= 64 ("all": also instead of the GEMVs).
int gemm_stream_mode();

// GemmPath::Stream's launch at (T, K, N) (T <= 64): cluster size (K splits), CTAs resident per SM,
// clusters of that size resident on the GPU at once (0 without clusters). For the harnesses.
void gemm_stream_info(int T, int K, int N, int* cluster, int* ctas_per_sm, int* max_clusters);

// True when DISPATCH_CUDA_GEMM_SKINNY2=1: Auto takes GemmPath::Skinny2 at every T <= 64 (read once).
int gemm_skinny2_mode();   // 0 never (=0), 1 the default rule (unset), 2 every T <= 64 (=1)

// GemmPath::Skinny2's launch at (T, K, N) (T <= 64): K splits (cluster size), CTAs, ring stages
// and dynamic shared memory per CTA. For the harnesses.
void gemm_skinny2_info(int T, int K, int N, int* splits, int* ctas, int* stages, int* smem_bytes);

// True when DISPATCH_CUDA_GEMM_WGMMA=1: Auto takes GemmPath::Wgmma at T > 64 (read once; off by
// default: not yet measured on a GPU).
bool gemm_wgmma_mode();

// GemmPath::Wgmma's launch at (T, K, N) with splits (0, or 128 / 256 to force the tile width): tile
// width, tiles, CTAs (persistent), ring stages and dynamic shared memory per CTA. For the harnesses.
void gemm_wgmma_info(int T, int K, int N, int splits, int* bn, int* tiles, int* ctas, int* stages, int* smem_bytes);

// Split K's sums (Skinny, Tiled, Legacy): -1 as DISPATCH_CUDA_GEMM_ATOMIC_SPLITK says (default), 0
// the deterministic fixed-order reduction, 1 the earlier fp32 atomics. For the harnesses' A/B.
void gemm_set_atomic_splitk(int mode);

struct QkvPostArgs;  // fused_ops.h

// The q|k|v projection of a prefill step with qkv_post (fused_ops.h) folded into the GEMM's epilogue: Y = X . W^T
// (+ bias), then qkv_post(post) on it, in one launch (gemm_wgmma_qkv.cuh): q back into Y rotated (fp32), k and v to
// the cache only. Returns false, launching nothing, where that kernel does not take the step: T <= 64 or the GEMM
// would not take GemmPath::Wgmma, head dim != 128, qk_norm 2, N != (Hq + 2 Hkv) D or Y != post.qkv; and unless
// DISPATCH_CUDA_QKV_GEMM=1 (read per launch; =128 or =256 also forces the tile width). The caller then runs gemm() and
// qkv_post(). post.rope_cs (rope_table) saves the epilogue its sincosf.
bool gemm_qkv_post(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                   const QkvPostArgs& post, cudaStream_t stream);
// DISPATCH_CUDA_QKV_GEMM set and not 0 (read per call): gemm_qkv_post may take steps (opt-in, "Session 24 runs").
bool gemm_qkv_post_enabled();

// gemm() with an explicit path; splits > 0 overrides the K split of Skinny and Tiled. A path that
// cannot take the shape falls back to the one Auto would use.
void gemm_path(GemmPath path, int splits, const bf16* X, int T, int K, const bf16* W, int N, const float* bias,
               float* Y, bool accumulate, cudaStream_t stream);

}  // namespace dcuda
