import { expect, test } from "bun:test";
import { createConsistentHashPolicy } from "./consistent-hash";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { backend, request } from "./test-fixtures";

const views = ["a", "b", "c", "d"].map((id) => backend(id));
const prompt = (g: number, extra: number) =>
  request({ blockHashes: [...Array.from({ length: 4 }, (_, i) => BigInt(g * 100 + i)), BigInt(1e9 + extra)] });

test("equal prefixes land on the same backend whatever follows them", () => {
  const p = createConsistentHashPolicy({ prefixTokens: 64 }); // 4 blocks of 16
  const rand = createSeededRand(1);
  for (let g = 0; g < 20; g++) {
    const first = p.choose(prompt(g, 1), views, rand).backendId;
    for (let k = 2; k < 6; k++) expect(p.choose(prompt(g, k), views, rand).backendId).toBe(first);
  }
});

test("keys spread over backends and adding one moves only some of them", () => {
  const p = createConsistentHashPolicy({ prefixTokens: 64 });
  const rand = createSeededRand(1);
  const before = Array.from({ length: 400 }, (_, g) => p.choose(prompt(g, 0), views, rand).backendId);
  expect(new Set(before).size).toBe(4);
  const after = Array.from({ length: 400 }, (_, g) => p.choose(prompt(g, 0), [...views, backend("e")], rand).backendId);
  const moved = before.filter((b, i) => after[i] !== b).length;
  expect(moved).toBeGreaterThan(20);
  expect(moved).toBeLessThan(160); // ~1/5 expected; far from a full reshuffle
  after.forEach((b, i) => {
    if (b !== before[i]) expect(b).toBe("e");
  });
});

test("an affinity key overrides the prefix; a prompt without full blocks goes anywhere", () => {
  const p = createConsistentHashPolicy();
  const rand = createSeededRand(1);
  const a = p.choose(request({ affinityKey: "user-1", blockHashes: [1n] }), views, rand);
  const b = p.choose(request({ affinityKey: "user-1", blockHashes: [2n] }), views, rand);
  expect(a.backendId).toBe(b.backendId);
  expect(a.reason).toBe("affinity");
  expect(p.choose(request({ blockHashes: [], promptTokens: 3 }), views, rand).reason).toBe("short");
});
