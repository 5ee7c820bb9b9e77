import { expect, test } from "bun:test";
import { createLeastLoadPolicy } from "./least-load";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { backend, request } from "./test-fixtures";

test("least-load picks the backend with the fewest running + waiting requests, ignoring the cache", () => {
  const p = createLeastLoadPolicy();
  const d = p.choose(request(), [backend("a", { matchedBlocks: 8 }, { running: 5 }), backend("b", {}, { running: 1, waiting: 1 }), backend("c", {}, { running: 3 })], createSeededRand(1));
  expect(d.backendId).toBe("b");
});

test("least-load counts requests routed since the last report and falls back to outstanding", () => {
  const p = createLeastLoadPolicy();
  const d = p.choose(request(), [backend("a", { pendingRequests: 3 }, { running: 1 }), backend("b", {}, { running: 2 }), { id: "c", outstanding: 4 }], createSeededRand(1));
  expect(d.backendId).toBe("b");
});

test("least-load breaks ties with rand, deterministically for a seed", () => {
  const p = createLeastLoadPolicy();
  const picks = new Set<string>();
  const rand = createSeededRand(7);
  for (let i = 0; i < 50; i++) picks.add(p.choose(request(), [backend("a"), backend("b")], rand).backendId);
  expect([...picks].sort()).toEqual(["a", "b"]);
  const run = (seed: number) => {
    const r = createSeededRand(seed);
    return Array.from({ length: 10 }, () => p.choose(request(), [backend("a"), backend("b")], r).backendId);
  };
  expect(run(3)).toEqual(run(3));
});
