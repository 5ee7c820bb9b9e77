import { expect, test } from "bun:test";
import { createCacheAwarePolicy } from "./cache-aware";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { backend, request } from "./test-fixtures";

const rand = createSeededRand(3);

test("balanced load and a match above the threshold: the longest match wins", () => {
  const p = createCacheAwarePolicy();
  const d = p.choose(request(), [backend("a", { matchedBlocks: 2 }), backend("b", { matchedBlocks: 6 })], rand);
  expect(d).toMatchObject({ backendId: "b", reason: "prefix", matchedBlocks: 6 });
});

test("a match at or below the threshold goes to the smallest cache", () => {
  const p = createCacheAwarePolicy({ cacheThreshold: 0.5 });
  // 4 of 8 blocks = 64 of 133 tokens < 0.5
  const d = p.choose(request(), [backend("a", { matchedBlocks: 4, cachedBlocks: 500 }), backend("b", { cachedBlocks: 10 })], rand);
  expect(d).toMatchObject({ backendId: "b", reason: "smallest-cache" });
});

test("imbalance needs BOTH thresholds; then the least loaded wins regardless of cache", () => {
  const p = createCacheAwarePolicy(); // abs 32, rel 1.1
  const busy = backend("a", { matchedBlocks: 8, outstanding: 40 }, { running: 40 });
  // 40 - 5 > 32 and 40 > 1.1 * 5: imbalanced
  expect(p.choose(request(), [busy, backend("b", {}, { running: 5 })], rand)).toMatchObject({ backendId: "b", reason: "imbalanced" });
  // 40 - 10 = 30, not > 32: balanced, cache wins
  expect(p.choose(request(), [busy, backend("b", {}, { running: 10 })], rand)).toMatchObject({ backendId: "a", reason: "prefix" });
  // relative threshold not exceeded (100 vs 95 * 1.1)
  const big = backend("a", { matchedBlocks: 8 }, { running: 100 });
  expect(p.choose(request(), [big, backend("b", {}, { running: 95 })], rand).backendId).toBe("a");
});
