// CPU references of every kernel, checked against independent TypeScript loops (float64).
import { beforeAll, describe, expect, test } from "bun:test";
import { loadKernels, type Kernels } from "../index";
import { bf16ToF32, ensureAddon, randBf16, relErr, rng } from "./helpers";

let k: Kernels;
beforeAll(() => {
  ensureAddon();
  k = loadKernels();
}, 300_000);

// Legend: E experts, N outputs, K inputs, M rows.
function refGemm(x: Uint16Array, w: (e: number, n: number, kk: number) => number, offsets: Int32Array, N: number,
  K: number, scale: (e: number, n: number) => number = () => 1): Float64Array {
  const E = offsets.length - 1, M = offsets[E]!;
  const y = new Float64Array(M * N);
  for (let e = 0; e < E; e++)
    for (let r = offsets[e]!; r < offsets[e + 1]!; r++)
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let kk = 0; kk < K; kk++) acc += bf16ToF32(x[r * K + kk]!) * w(e, n, kk);
        y[r * N + n] = acc * scale(e, n);
      }
  return y;
}

describe("grouped GEMM references", () => {
  const E = 5, N = 24, K = 40;
  const offsets = Int32Array.from([0, 3, 3, 10, 10, 17]); // experts 1 and 3 empty
  const r = rng(1);
  const x = randBf16(17 * K, r), w = randBf16(E * N * K, r);

  test("bf16 matches a float64 loop, empty experts included", () => {
    const y = k.cpu.groupedGemmBf16(x, w, offsets, E, N, K);
    const ref = refGemm(x, (e, n, kk) => bf16ToF32(w[(e * N + n) * K + kk]!), offsets, N, K);
    expect(relErr(y, ref, bf16ToF32)).toBeLessThan(5e-3);
  });

  test("an expert index off by one would be caught", () => {
    const y = k.cpu.groupedGemmBf16(x, w, offsets, E, N, K);
    const shifted = refGemm(x, (e, n, kk) => bf16ToF32(w[(((e + 1) % E) * N + n) * K + kk]!), offsets, N, K);
    expect(relErr(y, shifted, bf16ToF32)).toBeGreaterThan(0.5);
  });

  test("w8a16 matches dequantized weights", () => {
    const { q, scales } = k.cpu.quantizeInt8Rows(w, E * N, K);
    const y = k.cpu.groupedGemmW8a16(x, q, scales, offsets, E, N, K);
    const ref = refGemm(x, (e, n, kk) => q[(e * N + n) * K + kk]!, offsets, N, K, (e, n) => scales[e * N + n]!);
    expect(relErr(y, ref, bf16ToF32)).toBeLessThan(5e-3);
    const exact = refGemm(x, (e, n, kk) => bf16ToF32(w[(e * N + n) * K + kk]!), offsets, N, K);
    expect(relErr(y, exact, bf16ToF32)).toBeLessThan(2e-2); // int8 rounding error
  });

  test("bad shapes throw a coded error", () => {
    expect(() => k.cpu.groupedGemmBf16(x, w, Int32Array.from([0, 1]), E, N, K)).toThrow(/offsets/);
  });
});

describe("quantizer reference", () => {
  test("per-row symmetric scales, zero rows stay zero", () => {
    const w = randBf16(4 * 64, rng(2));
    w.fill(0, 64, 128);
    const { q, scales } = k.cpu.quantizeInt8Rows(w, 4, 64);
    expect(scales[1]).toBe(0);
    for (let i = 64; i < 128; i++) expect(q[i]).toBe(0);
    for (const row of [0, 2, 3]) {
      let amax = 0;
      for (let i = 0; i < 64; i++) amax = Math.max(amax, Math.abs(bf16ToF32(w[row * 64 + i]!)));
      expect(scales[row]).toBeCloseTo(amax / 127, 6);
      for (let i = 0; i < 64; i++) expect(Math.abs(q[row * 64 + i]! * scales[row]! - bf16ToF32(w[row * 64 + i]!)))
        .toBeLessThanOrEqual(scales[row]! / 2 + 1e-6);
    }
  });
});

describe("router reference", () => {
  const T = 16, r = rng(3);
  test("softmax top-k with and without renormalization", () => {
    const E = 64, topK = 8;
    const logits = Float32Array.from({ length: T * E }, () => r());
    for (const renormalize of [true, false]) {
      const { ids, weights } = k.cpu.routerTopk(logits, T, { numExperts: E, topK, renormalize });
      for (let t = 0; t < T; t++) {
        const row = Array.from(logits.subarray(t * E, (t + 1) * E));
        const mx = Math.max(...row);
        const p = row.map((v) => Math.exp(v - mx));
        const s = p.reduce((a, b) => a + b);
        const order = p.map((v, i): [number, number] => [v / s, i]).sort((a, b) => b[0] - a[0]).slice(0, topK);
        const wsum = order.reduce((a, b) => a + b[0], 0);
        for (let j = 0; j < topK; j++) {
          expect(ids[t * topK + j]).toBe(order[j]![1]);
          expect(weights[t * topK + j]).toBeCloseTo(renormalize ? order[j]![0] / wsum : order[j]![0], 5);
        }
      }
    }
  });

  test("DeepSeek-V3 grouped sigmoid top-k: bias picks, unbiased scores weigh", () => {
    const E = 32, topK = 4, numGroups = 8, topkGroups = 2, scale = 2.5;
    const logits = Float32Array.from({ length: T * E }, () => r());
    const bias = Float32Array.from({ length: E }, () => r() * 0.1);
    const { ids, weights } = k.cpu.routerTopk(logits, T, { numExperts: E, topK, scoring: "sigmoid", numGroups,
      topkGroups, scale, bias });
    const gs = E / numGroups;
    for (let t = 0; t < T; t++) {
      const s = Array.from(logits.subarray(t * E, (t + 1) * E), (v) => 1 / (1 + Math.exp(-v)));
      const c = s.map((v, e) => v + bias[e]!);
      const gscore = Array.from({ length: numGroups }, (_, g): [number, number] => {
        const v = c.slice(g * gs, (g + 1) * gs).sort((a, b) => b - a);
        return [v[0]! + v[1]!, g];
      }).sort((a, b) => b[0] - a[0]).slice(0, topkGroups).map((v) => v[1]);
      const cand = c.map((v, e): [number, number] => [gscore.includes(Math.floor(e / gs)) ? v : -Infinity, e])
        .sort((a, b) => b[0] - a[0]).slice(0, topK).map((v) => v[1]);
      const wsum = cand.reduce((a, e) => a + s[e]!, 0);
      for (let j = 0; j < topK; j++) {
        expect(ids[t * topK + j]).toBe(cand[j]);
        expect(weights[t * topK + j]).toBeCloseTo((s[cand[j]!]! / wsum) * scale, 5);
      }
    }
  });
});

describe("permute / unpermute / silu references", () => {
  const T = 6, topK = 2, E = 4, H = 16;
  const ids = Int32Array.from([0, 3, 3, 1, 0, 3, 2, 3, 3, 0, 1, 3]);

  test("align groups slots by expert (contiguous and masked)", () => {
    const { counts, offsets, slotRow } = k.cpu.moeAlign(ids, E, 0);
    expect(Array.from(counts)).toEqual([3, 2, 1, 6]);
    expect(Array.from(offsets)).toEqual([0, 3, 5, 6, 12]);
    for (let s = 0; s < ids.length; s++) {
      const e = ids[s]!;
      expect(slotRow[s]).toBeGreaterThanOrEqual(offsets[e]!);
      expect(slotRow[s]).toBeLessThan(offsets[e + 1]!);
    }
    expect(new Set(slotRow).size).toBe(ids.length);
    const masked = k.cpu.moeAlign(ids, E, T);
    for (let s = 0; s < ids.length; s++) expect(Math.floor(masked.slotRow[s]! / T)).toBe(ids[s]!);
  });

  test("unpermute(permute(x)) with weights summing to one gives x back", () => {
    const x = randBf16(T * H, rng(4));
    const { slotRow } = k.cpu.moeAlign(ids, E, 0);
    const xp = k.cpu.moePermute(x, slotRow, T, topK, H, T * topK);
    const weights = Float32Array.from({ length: T * topK }, (_, i) => (i % 2 ? 0.25 : 0.75));
    const out = k.cpu.moeUnpermute(xp, slotRow, weights, T, topK, H);
    expect(relErr(out, Array.from(x, bf16ToF32), bf16ToF32)).toBeLessThan(4e-3);
  });

  test("silu(gate) * up", () => {
    const rows = 3, I = 8;
    const h = randBf16(rows * 2 * I, rng(5));
    const act = k.cpu.siluMul(h, rows, I);
    const ref: number[] = [];
    for (let r = 0; r < rows; r++)
      for (let i = 0; i < I; i++) {
        const g = bf16ToF32(h[r * 2 * I + i]!), u = bf16ToF32(h[r * 2 * I + I + i]!);
        ref.push((g / (1 + Math.exp(-g))) * u);
      }
    expect(relErr(act, ref, bf16ToF32)).toBeLessThan(5e-3);
  });
});

describe("GPU facade without a GPU", () => {
  test("requireGpu throws DK_NO_GPU when no device is present", () => {
    if (k.gpuAvailable()) return; // on a GPU machine the device tests (kernels/test/gpu_test.py) apply
    expect(() => k.requireGpu()).toThrow(/no CUDA GPU/);
    try {
      k.requireGpu();
    } catch (e) {
      expect((e as { code?: string }).code).toBe("DK_NO_GPU");
    }
  });
});
