import { describe, expect, test } from "bun:test";
import { createRng } from "./rng";
import { candidateProbs, sampleToken } from "./sampler";
import { DEFAULT_SAMPLING, type SamplingOptions } from "./sequence";

const logits = new Float32Array([1, 3, 2, 0.5, 2.9]);
const opts = (o: Partial<SamplingOptions>): SamplingOptions => ({ ...DEFAULT_SAMPLING, ...o });
const ctx = (seed = 1n, extra: Partial<Parameters<typeof sampleToken>[2]> = {}) => ({
  counts: new Map<number, number>(),
  banned: [] as number[],
  rng: createRng(seed),
  topLogprobs: 0,
  ...extra,
});

function histogram(p: SamplingOptions, n: number, seed = 5n): number[] {
  const c = ctx(seed);
  const h = new Array(logits.length).fill(0);
  for (let i = 0; i < n; i++) h[sampleToken(logits, p, c).token]++;
  return h;
}

describe("rng", () => {
  test("same seed, same stream; different seeds differ; values in [0, 1)", () => {
    const a = createRng(42n);
    const b = createRng(42n);
    const c = createRng(43n);
    const xs = Array.from({ length: 100 }, () => a.next());
    expect(Array.from({ length: 100 }, () => b.next())).toEqual(xs);
    expect(Array.from({ length: 100 }, () => c.next())).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.1);
  });

  test("a 64-bit seed uses its high bits", () => {
    expect(createRng(1n << 40n).next()).not.toBe(createRng(0n).next());
  });
});

describe("sampler", () => {
  test("greedy picks the argmax and reports raw log-probabilities", () => {
    const r = sampleToken(logits, opts({}), ctx(1n, { topLogprobs: 2 }));
    expect(r.token).toBe(1);
    const lse = Math.log([...logits].reduce((s, x) => s + Math.exp(x), 0));
    expect(r.logprob).toBeCloseTo(3 - lse, 5);
    expect(r.top.map((t) => t.token)).toEqual([1, 4]);
    expect(r.top[1]!.logprob).toBeCloseTo(2.9 - lse, 5);
  });

  test("penalties follow OpenAI: logit - freq * count - presence * [count > 0]", () => {
    const counts = new Map([[1, 2]]);
    // 3 - 0.1*2 - 0 = 2.8 < 2.9: token 4 wins.
    expect(sampleToken(logits, opts({ frequencyPenalty: 0.1 }), ctx(1n, { counts })).token).toBe(4);
    expect(sampleToken(logits, opts({ presencePenalty: 0.05 }), ctx(1n, { counts })).token).toBe(1);
    expect(sampleToken(logits, opts({ presencePenalty: 0.2 }), ctx(1n, { counts })).token).toBe(4);
    // Negative penalties encourage repetition.
    expect(sampleToken(logits, opts({ frequencyPenalty: -1 }), ctx(1n, { counts: new Map([[3, 3]]) })).token).toBe(3);
  });

  test("logit_bias is added to the raw logits before penalties; the log-probabilities reported stay the model's", () => {
    expect(sampleToken(logits, opts({ logitBias: new Map([[4, 0.2]]) }), ctx(1n, {})).token).toBe(4);
    expect(sampleToken(logits, opts({ logitBias: new Map([[1, -100]]) }), ctx(1n, {})).token).toBe(4);
    // bias and penalty together: 3 + 0.3 - 0.5 * 1 = 2.8 < 2.9
    expect(sampleToken(logits, opts({ logitBias: new Map([[1, 0.3]]), frequencyPenalty: 0.5 }), ctx(1n, { counts: new Map([[1, 1]]) })).token).toBe(4);
    const forced = sampleToken(logits, opts({ logitBias: new Map([[0, 100]]), temperature: 1 }), ctx(3n, { topLogprobs: 1 }));
    expect(forced.token).toBe(0);
    const lse = Math.log([...logits].reduce((s, x) => s + Math.exp(x), 0));
    expect(forced.logprob).toBeCloseTo(logits[0]! - lse, 5);
    // ids past the vocabulary are ignored here (the request check refuses them)
    expect(sampleToken(logits, opts({ logitBias: new Map([[99, 100]]) }), ctx(1n, {})).token).toBe(1);
  });

  test("banned tokens (EOS before min_tokens) are never chosen", () => {
    expect(sampleToken(logits, opts({}), ctx(1n, { banned: [1] })).token).toBe(4);
    const h = histogram(opts({ temperature: 1 }), 500);
    expect(h[1]).toBeGreaterThan(0);
    const c = ctx(9n, { banned: [1, 4] });
    for (let i = 0; i < 200; i++) expect([1, 4]).not.toContain(sampleToken(logits, opts({ temperature: 1 }), c).token);
  });

  test("temperature sampling follows the softmax", () => {
    const n = 4000;
    const h = histogram(opts({ temperature: 1 }), n);
    const z = [...logits].reduce((s, x) => s + Math.exp(x), 0);
    for (let i = 0; i < logits.length; i++) {
      expect(Math.abs(h[i]! / n - Math.exp(logits[i]!) / z)).toBeLessThan(0.03);
    }
  });

  test("top-k keeps the k most likely; top-p keeps the smallest nucleus reaching p", () => {
    const hk = histogram(opts({ temperature: 1, topK: 2 }), 1000);
    expect(hk[0]! + hk[2]! + hk[3]!).toBe(0);
    expect(hk[1]! > 0 && hk[4]! > 0).toBe(true);
    // Probabilities: ~[.07,.34,.12,.03,.31]... top-p 0.5 keeps {1, 4}.
    const hp = histogram(opts({ temperature: 1, topP: 0.5 }), 1000);
    expect(hp[0]! + hp[2]! + hp[3]!).toBe(0);
    const dist = candidateProbs(logits, opts({ temperature: 1, topP: 0.5 }), { counts: new Map(), banned: [] });
    expect([...dist.keys()]).toEqual([1, 4]);
    expect([...dist.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
  });

  test("low temperature sharpens towards greedy", () => {
    const h = histogram(opts({ temperature: 0.05 }), 300);
    expect(h[1]).toBeGreaterThan(270);
  });

  test("same seed, same tokens; interleaving other draws elsewhere does not matter", () => {
    const p = opts({ temperature: 1.2, topP: 0.9 });
    const a = ctx(77n);
    const run1 = Array.from({ length: 50 }, () => sampleToken(logits, p, a).token);
    const b = ctx(77n);
    const other = ctx(78n);
    const run2 = Array.from({ length: 50 }, () => {
      sampleToken(logits, p, other); // another sequence in the same batch
      return sampleToken(logits, p, b).token;
    });
    expect(run2).toEqual(run1);
    expect(new Set(run1).size).toBeGreaterThan(1);
  });
});
