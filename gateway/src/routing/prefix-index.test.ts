import { describe, expect, test } from "bun:test";
import { createPrefixIndex } from "./prefix-index";

const h = (n: number) => BigInt(n);
const chain = (...ns: number[]) => ns.map(h);

describe("prefix index, exact mode", () => {
  test("matches the leading blocks each backend stored, stops at the first gap", () => {
    const idx = createPrefixIndex();
    idx.setMode("a", "exact");
    idx.setMode("b", "exact");
    idx.applyStored("a", chain(1, 2, 3));
    idx.applyStored("b", chain(1, 3));
    expect(idx.match(chain(1, 2, 3, 4), ["a", "b", "c"], 0)).toEqual([3, 1, 0]);
  });

  test("evictions and cache clears remove blocks", () => {
    const idx = createPrefixIndex();
    idx.setMode("a", "exact");
    idx.applyStored("a", chain(1, 2, 3));
    idx.applyEvicted("a", chain(2));
    expect(idx.match(chain(1, 2, 3), ["a"], 0)).toEqual([1]);
    idx.clear("a");
    expect(idx.match(chain(1), ["a"], 0)).toEqual([0]);
    expect(idx.size("a")).toBe(0);
  });

  test("routing alone does not count as held unless pending entries are on, and they expire", () => {
    const off = createPrefixIndex();
    off.setMode("a", "exact");
    off.recordRouted("a", chain(1, 2), 0);
    expect(off.match(chain(1, 2), ["a"], 1)).toEqual([0]);

    const on = createPrefixIndex({ pendingTtlMs: 100 });
    on.setMode("a", "exact");
    on.recordRouted("a", chain(1, 2), 0);
    expect(on.match(chain(1, 2), ["a"], 50)).toEqual([2]);
    expect(on.match(chain(1, 2), ["a"], 101)).toEqual([0]);
    on.applyStored("a", chain(1));
    expect(on.match(chain(1, 2), ["a"], 200)).toEqual([1]);
  });

  test("pending entries count only from block `pendingFrom` on; reported blocks always count", () => {
    const idx = createPrefixIndex({ pendingTtlMs: 1000 });
    idx.setMode("a", "exact");
    idx.recordRouted("a", chain(1, 2, 3), 0);
    expect(idx.match(chain(1, 2, 3), ["a"], 10, 0)).toEqual([3]);
    expect(idx.match(chain(1, 2, 3), ["a"], 10, 1)).toEqual([0]); // block 0 is pending only: the walk stops
    idx.applyStored("a", chain(1));
    expect(idx.match(chain(1, 2, 3), ["a"], 10, 1)).toEqual([3]);
    expect(idx.match(chain(1, 2, 3), ["a"], 10, 2)).toEqual([1]);
  });

  test("exact capacity bounds a runaway stream", () => {
    const idx = createPrefixIndex({ exactCapacityBlocks: 2 });
    idx.setMode("a", "exact");
    idx.applyStored("a", chain(1, 2, 3));
    expect(idx.size("a")).toBe(2);
  });
});

describe("prefix index, approximate mode", () => {
  test("remembers what was routed until the TTL passes", () => {
    const idx = createPrefixIndex({ approxTtlMs: 1000 });
    idx.recordRouted("a", chain(1, 2), 0);
    expect(idx.mode("a")).toBe("approximate");
    expect(idx.match(chain(1, 2, 3), ["a"], 999)).toEqual([2]);
    expect(idx.match(chain(1, 2, 3), ["a"], 1001)).toEqual([0]);
    idx.prune(1001);
    expect(idx.size("a")).toBe(0);
  });

  test("a new route refreshes the TTL of the blocks it reuses", () => {
    const idx = createPrefixIndex({ approxTtlMs: 1000 });
    idx.recordRouted("a", chain(1, 2), 0);
    idx.recordRouted("a", chain(1), 900);
    expect(idx.match(chain(1, 2), ["a"], 1500)).toEqual([1]);
  });

  test("capacity evicts least recently used blocks first", () => {
    const idx = createPrefixIndex({ approxCapacityBlocks: 3 });
    idx.recordRouted("a", chain(1, 2), 0);
    idx.recordRouted("a", chain(10, 11), 1); // evicts 1 (oldest)
    expect(idx.size("a")).toBe(3);
    expect(idx.match(chain(1, 2), ["a"], 2)).toEqual([0]);
    expect(idx.match(chain(10, 11), ["a"], 2)).toEqual([2]);
    idx.recordRouted("a", chain(2), 3); // touch 2, then 10 is oldest
    idx.recordRouted("a", chain(20), 4);
    expect(idx.match(chain(10), ["a"], 5)).toEqual([0]);
    expect(idx.match(chain(11), ["a"], 5)).toEqual([1]);
  });

  test("switching mode or removing a backend forgets it", () => {
    const idx = createPrefixIndex();
    idx.recordRouted("a", chain(1), 0);
    idx.setMode("a", "exact");
    expect(idx.match(chain(1), ["a"], 0)).toEqual([0]);
    idx.applyStored("a", chain(1));
    idx.removeBackend("a");
    expect(idx.match(chain(1), ["a"], 0)).toEqual([0]);
  });

  test("rejects nonsense bounds", () => {
    expect(() => createPrefixIndex({ approxTtlMs: 0 })).toThrow(RangeError);
    expect(() => createPrefixIndex({ pendingTtlMs: -1 })).toThrow(RangeError);
  });
});
