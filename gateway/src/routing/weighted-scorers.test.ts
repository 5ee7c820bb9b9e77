import { expect, test } from "bun:test";
import { createWeightedScorersPolicy } from "./weighted-scorers";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { backend, request } from "./test-fixtures";

const rand = createSeededRand(5);

test("prefix 3, queue 2, KV 2: a full match beats an empty queue only while the queue gap is small", () => {
  const p = createWeightedScorersPolicy();
  // a: prefix 1 (3) + queue 0 (worst) + kv 1 (2) = 5 ; b: prefix 0 + queue 1 (2) + kv 1 (2) = 4
  expect(p.choose(request(), [backend("a", { matchedBlocks: 8 }, { waiting: 4 }), backend("b")], rand).backendId).toBe("a");
  // with half the prompt matched: a = 1.5 + 0 + 2 = 3.5 < b = 4
  expect(p.choose(request(), [backend("a", { matchedBlocks: 4 }, { waiting: 4 }), backend("b")], rand).backendId).toBe("b");
});

test("KV utilisation counts, and equal queues all score 1", () => {
  const p = createWeightedScorersPolicy();
  const d = p.choose(request(), [backend("a", {}, { kvBlocksUsed: 900 }), backend("b", {}, { kvBlocksUsed: 100 })], rand);
  expect(d.backendId).toBe("b");
});

test("custom weights change the trade", () => {
  const p = createWeightedScorersPolicy({ prefix: 1, queue: 5, kv: 0 });
  expect(p.choose(request(), [backend("a", { matchedBlocks: 8 }, { waiting: 4 }), backend("b")], rand).backendId).toBe("b");
});
