/**
 * Layout, dispatch and combine arithmetic: N ranks (1, 2, 4, 8) in lockstep on
 * one thread, each with its own slice of the tokens, reproduce the single-rank
 * CPU MoE (createCpuBackend().moe) on the same tokens:
 *   low-latency: bit-identical (same rows, same kernels, the source sums its k
 *     rows in the single-rank order);
 *   high-throughput: rank-partial sums (DeepEP's normal combine) round each
 *     rank's partial to fp32 before the cross-rank add, so the result may differ
 *     by fp32 rounding: bound 1e-6 absolute on outputs of magnitude ~1 (checked),
 *     and bit-identical when one rank holds every expert.
 */
import { describe, expect, test } from "bun:test";
import { createCpuBackend, type CpuTensor } from "../backend/cpu/cpu-backend";
import { createCpuExpertCompute } from "./cpu-experts";
import { computeLayout } from "./layout";
import { createContiguousPlacement, createPlacement, type ExpertPlacement } from "./placement";
import { runLockstep, type RankInput } from "./testing/lockstep";

const H = 24;
const I = 16;
const E = 16;
const K = 4;

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type RoutingKind = "random" | "empty-experts" | "one-expert-all" | "skewed";

function makeRouting(kind: RoutingKind, T: number, rand: () => number) {
  const ids = new Int32Array(T * K);
  const weights = new Float32Array(T * K);
  const pool = kind === "empty-experts" ? [1, 2, 5, 9, 13] : Array.from({ length: E }, (_, e) => e);
  for (let t = 0; t < T; t++) {
    const chosen: number[] = kind === "one-expert-all" ? [7] : [];
    while (chosen.length < K) {
      const e = kind === "skewed" && rand() < 0.6 ? Math.floor(rand() * 3) : pool[Math.floor(rand() * pool.length)]!;
      if (!chosen.includes(e)) chosen.push(e);
    }
    // Keep slot order random (the router's is by score, not by id).
    chosen.forEach((e, j) => {
      ids[t * K + j] = e;
      weights[t * K + j] = Math.fround(0.05 + rand());
    });
  }
  return { ids, weights };
}

const placements: Record<number, [string, ExpertPlacement][]> = {
  1: [["one rank", createContiguousPlacement(E, 1)]],
  2: [
    ["even", createContiguousPlacement(E, 2)],
    ["uneven 3/13", createContiguousPlacement(E, 2, [3, 13])],
    ["interleaved", createPlacement(E, [Array.from({ length: 8 }, (_, i) => 2 * i), Array.from({ length: 8 }, (_, i) => 2 * i + 1)])],
    ["expert 7 replicated", createPlacement(E, [[0, 1, 2, 3, 4, 5, 6, 7], [7, 8, 9, 10, 11, 12, 13, 14, 15]])],
  ],
  4: [
    ["even", createContiguousPlacement(E, 4)],
    ["uneven 1/2/5/8", createContiguousPlacement(E, 4, [1, 2, 5, 8])],
    ["rank with no experts", createContiguousPlacement(E, 4, [6, 0, 5, 5])],
  ],
  8: [
    ["even", createContiguousPlacement(E, 8)],
    ["uneven, scattered, 2 replicas of 0-2", createPlacement(E, [[0, 15], [1, 14, 3], [2, 13], [12, 4, 0], [5, 11], [6, 10, 1], [7, 9, 2], [8]])],
  ],
};

describe("dispatch/combine reproduce the single-rank MoE", () => {
  const be = createCpuBackend({ native: false });
  const rand = rng(20261129);
  const gateUp = Float32Array.from({ length: E * 2 * I * H }, () => (rand() - 0.5) * 0.5);
  const down = Float32Array.from({ length: E * H * I }, () => (rand() - 0.5) * 0.5);
  const experts = be.experts(gateUp, down, E, I, H);
  const compute = createCpuExpertCompute(H, { native: false });

  for (const N of [1, 2, 4, 8]) {
    for (const [pname, placement] of placements[N]!) {
      for (const kind of ["random", "empty-experts", "one-expert-all", "skewed"] as RoutingKind[]) {
        test(`EP=${N}, ${pname}, ${kind} routing`, () => {
          const r = rng(N * 1000 + kind.length * 7 + pname.length);
          // Uneven token shares, one rank with none when N > 1.
          const shares = Array.from({ length: N }, (_, i) => (N > 1 && i === N - 1 ? 0 : 1 + Math.floor(r() * 9)));
          const T = shares.reduce((a, b) => a + b, 0);
          const x = Float32Array.from({ length: T * H }, () => (r() - 0.5) * 2);
          const { ids, weights } = makeRouting(kind, T, r);
          const ref = be.alloc(T, H) as CpuTensor;
          be.moe(be.weight(x, T, H), experts, { ids, weights, topK: K }, ref);

          let at = 0;
          const inputs: RankInput[] = shares.map((n) => {
            const inp = { x: x.slice(at * H, (at + n) * H), ids: ids.slice(at * K, (at + n) * K), weights: weights.slice(at * K, (at + n) * K) };
            at += n;
            return inp;
          });
          const gather = (outs: Float32Array[]): Float32Array<ArrayBufferLike> => {
            const all = new Float32Array(T * H);
            let o = 0;
            for (const part of outs) {
              all.set(part, o);
              o += part.length;
            }
            return all;
          };

          const ll = runLockstep("low-latency", inputs, K, H, placement, experts, compute, { maxTokensPerRank: Math.max(...shares) });
          expect(gather(ll.out)).toEqual(ref.data);
          // Fixed shapes: every rank's buffers are [Le, cap, H] whatever the routing.
          ll.ll!.forEach((d, rank) => {
            expect(d.cap).toBe(Math.max(...shares) * N);
            expect(d.xs.length).toBe(placement.localExperts(rank).length * d.cap * H);
          });

          for (const align of [1, 8]) {
            const ht = runLockstep("high-throughput", inputs, K, H, placement, experts, compute, { align });
            const got = gather(ht.out);
            let maxDiff = 0;
            for (let i = 0; i < got.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i]! - ref.data[i]!));
            expect(maxDiff).toBeLessThanOrEqual(1e-6);
            if (N === 1) expect(got).toEqual(ref.data);
            ht.ht!.forEach((d) => {
              for (const off of d.offsets) expect(off % align).toBe(0);
              d.count.forEach((c, le) => expect(d.offsets[le + 1]! - d.offsets[le]!).toBeGreaterThanOrEqual(c));
            });
          }
        });
      }
    }
  }
});

describe("layout", () => {
  test("counts per rank (a token once per rank) and per expert, send lists ascending", () => {
    const p = createContiguousPlacement(4, 2);
    const ids = Int32Array.of(0, 1, /* t1 */ 2, 3, /* t2 */ 1, 2, /* t3 */ 0, 0 + 1);
    const lay = computeLayout(ids, 2, p, 0);
    expect([...lay.numTokensPerRank]).toEqual([3, 2]);
    expect([...lay.numTokensPerExpert]).toEqual([2, 3, 2, 1]);
    expect([...lay.isTokenInRank]).toEqual([1, 0, 0, 1, 1, 1, 1, 0]);
    expect(lay.sendTokens.map((s) => [...s])).toEqual([[0, 2, 3], [1, 2]]);
  });
  test("replicas split a hot expert's tokens by a rule every rank computes alike", () => {
    const p = createPlacement(2, [[0, 1], [1]]);
    const ids = Int32Array.of(1, 1, 1, 1);
    expect([...computeLayout(ids, 1, p, 0).slotRank]).toEqual([0, 1, 0, 1]);
    expect([...computeLayout(ids, 1, p, 1).slotRank]).toEqual([1, 0, 1, 0]);
  });
  test("bad routing and bad placements are clear errors", () => {
    const p = createContiguousPlacement(4, 2);
    expect(() => computeLayout(Int32Array.of(0, 4), 2, p, 0)).toThrow(/expert 4, outside \[0, 4\)/);
    expect(() => computeLayout(Int32Array.of(0, 1, 2), 2, p, 0)).toThrow(/not a multiple of top-k/);
    expect(() => createPlacement(4, [[0, 1], [2]])).toThrow(/expert 3 is on no rank/);
    expect(() => createPlacement(4, [[0, 1, 1], [2, 3]])).toThrow(/lists expert 1 twice/);
    expect(() => createContiguousPlacement(4, 2, [1, 2])).toThrow(/do not split 4 experts/);
    expect(p.contiguous).toBe(true);
    expect(createPlacement(4, [[1, 0], [2, 3]]).contiguous).toBe(false);
  });
  test("low-latency mode refuses a step larger than its capacity", () => {
    const be = createCpuBackend({ native: false });
    const ex = be.experts(new Float32Array(2 * 2 * 2 * 2), new Float32Array(2 * 2 * 2), 2, 2, 2);
    const p = createContiguousPlacement(2, 1);
    const inp = { x: new Float32Array(3 * 2), ids: Int32Array.of(0, 1, 0), weights: new Float32Array(3) };
    expect(() => runLockstep("low-latency", [inp], 1, 2, p, ex, createCpuExpertCompute(2, { native: false }), { maxTokensPerRank: 2 })).toThrow(/3 tokens exceed the low-latency capacity of 2/);
  });
});

describe("deepseek-moe-16b routing shape (E 64, top-6, H 2048; intermediate shrunk to 8 so the CPU test stays fast)", () => {
  const E16 = 64;
  const K16 = 6;
  const H16 = 2048;
  const I16 = 8;
  const be = createCpuBackend({ native: false });
  const rand = rng(16);
  const experts = be.experts(
    Float32Array.from({ length: E16 * 2 * I16 * H16 }, () => (rand() - 0.5) * 0.1),
    Float32Array.from({ length: E16 * H16 * I16 }, () => (rand() - 0.5) * 0.5),
    E16,
    I16,
    H16,
  );
  const compute = createCpuExpertCompute(H16, { native: false });
  // 32 tokens per rank: the low-latency buffers are [Le, 32 * N, 2048] fp32 per rank.
  const P = 32;
  for (const N of [2, 4, 8]) {
    test(`EP=${N}, ${P} tokens per rank`, () => {
      const T = P * N;
      const r = rng(N);
      const x = Float32Array.from({ length: T * H16 }, () => r() - 0.5);
      const ids = new Int32Array(T * K16);
      const weights = new Float32Array(T * K16);
      for (let t = 0; t < T; t++) {
        const chosen: number[] = [];
        while (chosen.length < K16) {
          const e = Math.floor(r() * E16);
          if (!chosen.includes(e)) chosen.push(e);
        }
        chosen.forEach((e, j) => {
          ids[t * K16 + j] = e;
          weights[t * K16 + j] = Math.fround(r() / K16);
        });
      }
      const ref = be.alloc(T, H16) as CpuTensor;
      be.moe(be.weight(x, T, H16), experts, { ids, weights, topK: K16 }, ref);
      const inputs: RankInput[] = Array.from({ length: N }, (_, i) => ({ x: x.slice(i * P * H16, (i + 1) * P * H16), ids: ids.slice(i * P * K16, (i + 1) * P * K16), weights: weights.slice(i * P * K16, (i + 1) * P * K16) }));
      const placement = createContiguousPlacement(E16, N);
      const ll = runLockstep("low-latency", inputs, K16, H16, placement, experts, compute, { maxTokensPerRank: P });
      ll.out.forEach((o, i) => expect(o).toEqual(ref.data.subarray(i * P * H16, (i + 1) * P * H16)));
      const ht = runLockstep("high-throughput", inputs, K16, H16, placement, experts, compute, { align: 128 });
      let maxDiff = 0;
      ht.out.forEach((o, i) => o.forEach((v, j) => (maxDiff = Math.max(maxDiff, Math.abs(v - ref.data[i * P * H16 + j]!)))));
      expect(maxDiff).toBeLessThanOrEqual(1e-6);
      ht.ht!.forEach((d) => d.offsets.forEach((o) => expect(o % 128).toBe(0)));
    });
  }
});
