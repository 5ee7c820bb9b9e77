import { describe, expect, test } from "bun:test";
import { createDispatchCostPolicy, DEFAULT_COST_MODEL, estimateCost, peerPrefillRate } from "./dispatch-cost";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { backend, request } from "./test-fixtures";

const rand = createSeededRand(9);
// 2,048-token prompt in 128 blocks of 16.
const long = request({ blockHashes: Array.from({ length: 128 }, (_, i) => BigInt(i + 1)), promptTokens: 2048, expectedOutputTokens: 100 });

describe("dispatch cost model", () => {
  test("TTFT term: queued + uncached tokens at the prefill rate, plus one decode step per chunk", () => {
    const m = { ...DEFAULT_COST_MODEL, prefillTokensPerS: 10_000, chunkTokens: 2048, stepBaseMs: 5, stepPerSeqMs: 0.25 };
    const c = estimateCost(long, backend("a", { matchedBlocks: 64 }, { queuedPrefillTokens: 2048, running: 4 }), m);
    // W = 2048 queued + 1024 uncached = 3072 tokens: 307.2 ms + 2 chunks x (5 + 4 x 0.25) ms
    expect(c.ttftMs).toBeCloseTo(307.2 + 2 * 6, 6);
    // miss term: our 1024 uncached tokens twice more (missWeight 2)
    expect(c.missMs).toBeCloseTo(204.8, 6);
    // decode pressure: 0.02 x 100 tokens x 6 ms
    expect(c.decodeMs).toBeCloseTo(12, 6);
    expect(c.kvMs).toBe(0);
  });

  test("the miss term shrinks when the prefix the backend lacks is hot", () => {
    const m = DEFAULT_COST_MODEL;
    const cold = estimateCost(long, backend("a", { missedPrefixRate: 0 }), m);
    const hot = estimateCost(long, backend("a", { missedPrefixRate: 9 }), m);
    expect(cold.missMs).toBeCloseTo(409.6, 6);
    expect(hot.missMs).toBeCloseTo(40.96, 6); // amortised over 1 + 9 x 1 s of traffic
    expect(hot.ttftMs).toBe(cold.ttftMs);
  });

  test("cached blocks our request would evict are charged part of their recompute", () => {
    const m = { ...DEFAULT_COST_MODEL, evictWeight: 0.5, kvPenaltyMs: 0 };
    // 2,048 uncached + 100 out = 135 blocks of 16 needed; 10,000 total.
    const roomy = estimateCost(long, backend("a", { cachedBlocks: 1000 }, { kvBlocksUsed: 0, kvBlocksTotal: 10_000 }), m);
    expect(roomy.kvMs).toBe(0);
    const full = estimateCost(long, backend("a", { cachedBlocks: 9_900 }, { kvBlocksUsed: 0, kvBlocksTotal: 10_000 }), m);
    // 135 - 100 free = 35 blocks evicted x 16 tokens at 10,000 tokens/s x 0.5
    expect(full.kvMs).toBeCloseTo(0.5 * 35 * 16 * 0.1, 6);
  });

  test("measured rates replace the fallbacks", () => {
    const c = estimateCost(long, backend("a", {}, { prefillTokensPerS: 20_000, decodeStepsPerS: 100 }), DEFAULT_COST_MODEL);
    expect(c.ttftMs).toBeCloseTo(102.4 + 10, 6);
  });

  test("KV pressure starts at the soft limit and counts pending and needed blocks", () => {
    const m = DEFAULT_COST_MODEL;
    const free = estimateCost(long, backend("a", {}, { kvBlocksUsed: 0, kvBlocksTotal: 10_000 }), m);
    expect(free.kvMs).toBe(0);
    // needed: (2048 + 100) / 16 = 134.25 -> 135 blocks; used 800 of 1000 -> u = 0.935
    const tight = estimateCost(long, backend("a", {}, { kvBlocksUsed: 800, kvBlocksTotal: 1000 }), m);
    expect(tight.kvMs).toBeCloseTo((500 * (0.935 - 0.85)) / 0.15, 6);
  });
});

describe("dispatch policy", () => {
  test("follows the cache when the queue there is short", () => {
    const p = createDispatchCostPolicy();
    const d = p.choose(long, [backend("a", { matchedBlocks: 120 }, { queuedPrefillTokens: 500 }), backend("b")], rand);
    expect(d).toMatchObject({ backendId: "a", reason: "cost", matchedBlocks: 120 });
  });

  test("leaves the cache when the queue there costs more than prefilling elsewhere", () => {
    const p = createDispatchCostPolicy();
    const d = p.choose(long, [backend("a", { matchedBlocks: 120 }, { queuedPrefillTokens: 8000 }), backend("b")], rand);
    expect(d.backendId).toBe("b");
  });

  test("work routed since the last report counts as queue (no herding on a stale report)", () => {
    const p = createDispatchCostPolicy();
    const views = [backend("a", { matchedBlocks: 120, pendingPrefillTokens: 8000, pendingRequests: 4 }), backend("b")];
    expect(p.choose(long, views, rand).backendId).toBe("b");
  });

  test("an affine backend wins within the slack, not beyond it", () => {
    const p = createDispatchCostPolicy({ affinitySlackMs: 50 });
    const req = { ...long, affinityKey: "u1" };
    const near = [backend("a", { affine: true }, { queuedPrefillTokens: 300 }), backend("b")];
    expect(p.choose(req, near, rand)).toMatchObject({ backendId: "a", reason: "affinity" });
    const far = [backend("a", { affine: true }, { queuedPrefillTokens: 3000 }), backend("b")];
    expect(p.choose(req, far, rand).backendId).toBe("b");
  });

  test("a session's first request is placed on TTFT alone; later ones also weigh the redundant prefill", () => {
    const p = createDispatchCostPolicy();
    // a holds 64 of 128 blocks but has 1,200 more tokens queued: TTFT says b (20 ms better), the miss term says a.
    const views = (affine: boolean) => [backend("a", { matchedBlocks: 64, affine }, { queuedPrefillTokens: 1200 }), backend("b")];
    expect(p.choose({ ...long, affinityKey: "new" }, views(false), rand).backendId).toBe("b");
    expect(p.choose(long, views(false), rand).backendId).toBe("a");
  });

  test("backends without any report are costed from in-flight counts", () => {
    const p = createDispatchCostPolicy();
    const d = p.choose(long, [{ id: "a", outstanding: 30, pendingPrefillTokens: 4096 }, { id: "b", outstanding: 0 }], rand);
    expect(d.backendId).toBe("b");
  });

  test("a backend with no measured prefill rate is priced at its peers' median, not the fixed fallback", () => {
    expect(peerPrefillRate([backend("a"), backend("b")])).toBeUndefined();
    expect(peerPrefillRate([backend("a", {}, { prefillTokensPerS: 3000 }), backend("b"), backend("c", {}, { prefillTokensPerS: 5000 }),
      backend("d", {}, { prefillTokensPerS: 1000 })])).toBe(3000);
    expect(peerPrefillRate([backend("a", {}, { prefillTokensPerS: 2000 }), backend("b", {}, { prefillTokensPerS: 4000 })])).toBe(3000);
    // a (CPU-slow, measured 2,000 tokens/s) holds 64 of the 128 blocks; b has never prefilled. Priced at the
    // 10,000 tokens/s fallback b would look cheaper for all 2,048 tokens than a for its 1,024 (the bug the
    // routing-e2e test hit); at a's rate the prefix wins.
    const p = createDispatchCostPolicy();
    const views = [backend("a", { matchedBlocks: 64 }, { prefillTokensPerS: 2000 }), backend("b")];
    const atFallback = estimateCost(long, views[1]!, DEFAULT_COST_MODEL).total;
    expect(atFallback).toBeLessThan(estimateCost(long, views[0]!, DEFAULT_COST_MODEL).total);
    expect(p.choose(long, views, rand)).toMatchObject({ backendId: "a", reason: "cost" });
    // a measured rate is used as it is
    expect(estimateCost(long, views[0]!, DEFAULT_COST_MODEL, 50_000).ttftMs).toBe(estimateCost(long, views[0]!, DEFAULT_COST_MODEL).ttftMs);
  });

  test("rejects impossible constants", () => {
    expect(() => createDispatchCostPolicy({ kvSoftLimit: 1 })).toThrow(RangeError);
    expect(() => createDispatchCostPolicy({ prefillTokensPerS: 0 })).toThrow(RangeError);
  });
});
