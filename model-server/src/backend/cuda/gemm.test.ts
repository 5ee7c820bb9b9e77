/**
 * The CUDA backend's dense GEMM against an fp64 reference on the same bf16-rounded inputs, for
 * each of its paths (GPU only; skipped elsewhere): GEMV (T <= 8, vector loads one or two rows per
 * warp with K tails, scalar loads; DISPATCH_CUDA_UNFUSED=1 runs the earlier GEMV instead), the
 * skinny mma.sync GEMM (8 < T <= 64; DISPATCH_CUDA_GEMM_SKINNY=async runs its cp.async variant:
 * ragged token tiles, N not a multiple of 128, odd N, K tails, split K), the
 * 128x128 mma.sync tiles (T > 64: ragged edges, K tails, split K when the tiles are few), and
 * the WMMA tiles (K % 8 != 0, or every T > 8 under
 * DISPATCH_CUDA_GEMM_LEGACY=1), plain and accumulating. The test hook passes no bias;
 * native-cuda/scripts/gemm-bench.sh checks bias on every path. Bound: 1e-3 relative to the row's
 * sum of |x||w| (fp32 accumulation order).
 */
import { expect, test } from "bun:test";
import { probeCuda } from "./native";

const probe = probeCuda();

function bf16(v: number): number {
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer);
  u[0] = (u[0]! + 0x7fff + ((u[0]! >>> 16) & 1)) & 0xffff0000;
  return f[0]!;
}

function rand(n: number, seed: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return bf16(s / 2 ** 32 - 0.5);
  });
}

const SHAPES: [number, number, number][] = [
  [1, 2048, 300], // GEMV, 16-byte loads
  [5, 40, 33], // GEMV, scalar loads (K % 8 != 0)
  [8, 1024, 4301], // GEMV, two rows per warp (T >= 4, N >= 4224), odd N: the last warp's second row is past N
  [4, 4104, 40], // GEMV, K not a multiple of a warp's 8-load chunk (one row per warp)
  [20, 32, 70], // skinny (WMMA under DISPATCH_CUDA_GEMM_LEGACY=1), ragged tiles
  [64, 2048, 512], // skinny, split K with atomic adds (WMMA split K under the legacy switch)
  [200, 300, 130], // K % 8 != 0: WMMA tiles, K tail not a multiple of the K step
  [9, 200, 130], // skinny, one token tile, K tail inside a 128-k load group, N not a multiple of 128
  [33, 1032, 261], // skinny, odd N (scalar epilogue), three token tiles
  [64, 4104, 520], // skinny, four token tiles, split K with a K tail in the last split
  [40, 36, 70], // K % 8 != 0 at a skinny T: the WMMA tiles
  [65, 136, 130], // tiled, the first T past the skinny path, ragged N, K tail
  [130, 2056, 260], // tiled, few tiles: split K with atomic adds
  [300, 1000, 390], // tiled, ragged edges in both directions
];

test.skipIf(!probe.ok)("dense GEMM paths match an fp64 reference", () => {
  const addon = probe.ok ? probe.addon : null!;
  for (const [T, K, N] of SHAPES) {
    for (const acc of [false, true]) {
      const x = rand(T * K, T + K);
      const w = rand(N * K, N * 7 + K);
      const y0 = rand(T * N, 3);
      const got = addon.testGemm(x, w, y0, T, K, N, acc);
      let worst = 0;
      for (let t = 0; t < T; t++) {
        for (let n = 0; n < N; n++) {
          let ref = acc ? y0[t * N + n]! : 0;
          let mag = 1e-6;
          for (let k = 0; k < K; k++) {
            ref += x[t * K + k]! * w[n * K + k]!;
            mag += Math.abs(x[t * K + k]! * w[n * K + k]!);
          }
          worst = Math.max(worst, Math.abs(got[t * N + n]! - ref) / mag);
        }
      }
      console.error(`[gemm] T=${T} K=${K} N=${N} acc=${acc}: worst relative error ${worst.toExponential(2)}`);
      expect(worst).toBeLessThan(1e-3);
    }
  }
}, 60_000); // the fp64 reference on the CPU takes ~7 s for the larger shapes

// Split K adds the splits' partials in a fixed order (gemm_splitk.cuh), so the same
// inputs give the same bits every time; DISPATCH_CUDA_GEMM_ATOMIC_SPLITK=1 (fp32 atomics) does not.
const atomicSplitK = process.env.DISPATCH_CUDA_GEMM_ATOMIC_SPLITK === "1";
const SPLIT_SHAPES: [number, number, number][] = [
  [130, 2056, 260], // tiled, few tiles: split K
  [128, 4096, 2048], // tiled, the o projection at a 128-token prefill: split K, accumulating
  [64, 2048, 512], // skinny under DISPATCH_CUDA_SKINNY_V2=0, WMMA under DISPATCH_CUDA_GEMM_LEGACY=1
  [200, 300, 130], // K % 8 != 0: WMMA tiles with split K
];

test.skipIf(!probe.ok || atomicSplitK)("split-K GEMMs give the same bits run to run", () => {
  const addon = probe.ok ? probe.addon : null!;
  for (const [T, K, N] of SPLIT_SHAPES) {
    for (const acc of [false, true]) {
      const x = rand(T * K, T + K + 1);
      const w = rand(N * K, N * 5 + K);
      const y0 = rand(T * N, 9);
      const bits = () => new Uint32Array(Float32Array.from(addon.testGemm(x, w, y0, T, K, N, acc)).buffer);
      const first = bits();
      for (let r = 1; r < 5; r++) {
        const again = bits();
        let differ = 0;
        for (let i = 0; i < first.length; i++) if (first[i] !== again[i]) differ++;
        expect({ T, K, N, acc, run: r, differ }).toEqual({ T, K, N, acc, run: r, differ: 0 });
      }
    }
  }
}, 60_000);
