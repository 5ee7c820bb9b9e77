/**
 * Kernel checks: the TypeScript kernels against a float64 reference, and the
 * native ones (when built) against the TypeScript ones, on odd sizes (tails of
 * the vector loops), GQA, a sliding window and scattered blocks.
 */
import { describe, expect, test } from "bun:test";
import * as ref from "./kernels";
import { loadNativeKernels } from "./native";

let seed = 7;
const rand = (n: number) => Float32Array.from({ length: n }, () => ((seed = (seed * 16807) % 2147483647) / 2147483647) * 2 - 1);
const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);

function linear64(x: Float32Array, w: Float32Array, T: number, K: number, N: number, bias?: Float32Array) {
  const out = new Float32Array(T * N);
  for (let t = 0; t < T; t++) for (let n = 0; n < N; n++) {
    let s = bias ? bias[n]! : 0;
    for (let k = 0; k < K; k++) s += x[t * K + k]! * w[n * K + k]!;
    out[t * N + n] = s;
  }
  return out;
}

const native = loadNativeKernels();
const impls: [string, typeof ref.linear, typeof ref.attentionSeq][] = [["ts", ref.linear, ref.attentionSeq]];
if (native) impls.push(["native", native.linear, native.attentionSeq]);

for (const [name, linear, attention] of impls) {
  describe(`${name} kernels`, () => {
    test("linear on odd shapes, with and without bias", () => {
      for (const [T, K, N] of [[1, 13, 7], [5, 64, 9], [3, 257, 33], [33, 40, 5]] as const) {
        const x = rand(T * K);
        const w = rand(N * K);
        const b = rand(N);
        const out = new Float32Array(T * N);
        linear(x, w, out, T, K, N);
        expect(maxDiff(out, linear64(x, w, T, K, N))).toBeLessThan(1e-5);
        linear(x, w, out, T, K, N, b);
        expect(maxDiff(out, linear64(x, w, T, K, N, b))).toBeLessThan(1e-5);
      }
    });

    test("paged attention: GQA, scattered blocks, sliding window, chunk in the middle of a sequence", () => {
      const B = 4, Hq = 6, Hkv = 2, D = 12, blocks = 10;
      const k = rand(blocks * B * Hkv * D);
      const v = rand(blocks * B * Hkv * D);
      const table = Int32Array.from([7, 2, 9, 0, 5]);
      const qLen = 6, startPos = 11, qStart = 2;
      const q = rand((qStart + qLen) * Hq * D);
      for (const window of [0, 5]) {
        const out = new Float32Array((qStart + qLen) * Hq * D);
        attention(q, out, k, v, table, qStart, qLen, startPos, B, Hq, Hkv, D, 0.3, window, new Float32Array(64));
        // float64 reference
        for (let i = 0; i < qLen; i++) {
          const pos = startPos + i;
          const lo = window > 0 ? Math.max(0, pos - window + 1) : 0;
          for (let h = 0; h < Hq; h++) {
            const g = Math.floor(h / (Hq / Hkv));
            const s: number[] = [];
            for (let j = lo; j <= pos; j++) {
              const slot = table[Math.floor(j / B)]! * B + (j % B);
              let d = 0;
              for (let e = 0; e < D; e++) d += q[((qStart + i) * Hq + h) * D + e]! * k[(slot * Hkv + g) * D + e]!;
              s.push(d * 0.3);
            }
            const mx = Math.max(...s);
            const p = s.map((x) => Math.exp(x - mx));
            const z = p.reduce((a, b) => a + b, 0);
            for (let e = 0; e < D; e++) {
              let o = 0;
              for (let j = lo; j <= pos; j++) o += (p[j - lo]! / z) * v[((table[Math.floor(j / B)]! * B + (j % B)) * Hkv + g) * D + e]!;
              expect(Math.abs(o - out[((qStart + i) * Hq + h) * D + e]!)).toBeLessThan(1e-5);
            }
          }
        }
      }
    });
  });
}

test("route: softmax then top-k, renormalized or not", () => {
  const logits = Float32Array.from([0, 1, 2, 3, 3, 2, 1, 0]);
  const ids = new Int32Array(4);
  const w = new Float32Array(4);
  ref.routeTopK(logits, 2, 4, 2, false, ids, w);
  expect(Array.from(ids)).toEqual([3, 2, 0, 1]);
  const z = 1 + Math.E + Math.E ** 2 + Math.E ** 3;
  expect(w[0]).toBeCloseTo(Math.E ** 3 / z, 6);
  ref.routeTopK(logits, 2, 4, 2, true, ids, w);
  expect(w[0]! + w[1]!).toBeCloseTo(1, 6);
  expect(w[0]).toBeCloseTo(Math.E / (1 + Math.E), 6);
});
