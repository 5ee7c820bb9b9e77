import { describe, expect, test } from "bun:test";
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { createBlockManager } from "./block-manager";

const B = 4;
const root = rootHash("test-model");
const tokens = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => i + offset);

describe("block manager", () => {
  test("allocates fresh blocks and refuses beyond capacity without changing anything", () => {
    const bm = createBlockManager({ numBlocks: 4, blockSize: B });
    const a: number[] = [];
    expect(bm.allocate(a, [], 0, 3)).toBe(true);
    expect(a).toEqual([0, 1, 2]);
    const b: number[] = [];
    expect(bm.canAllocate(0, [], 0, 2)).toBe(false);
    expect(bm.allocate(b, [], 0, 2)).toBe(false);
    expect(b).toEqual([]);
    expect(bm.stats()).toEqual({ total: 4, used: 3, cached: 0, empty: 1 });
    bm.release(a);
    expect(a).toEqual([]);
    expect(bm.stats()).toEqual({ total: 4, used: 0, cached: 0, empty: 4 });
  });

  test("registered blocks are reused by prefix with reference counts", () => {
    const bm = createBlockManager({ numBlocks: 8, blockSize: B });
    const h = hashBlocks(tokens(12), B, root);
    const a: number[] = [];
    bm.allocate(a, h, 0, 3);
    bm.register(a, h, 0, 3);
    expect(bm.drainEvents()).toEqual([{ kind: "stored", hashes: h, parent: 0n }]);

    // Same first two blocks, different third.
    const h2 = hashBlocks([...tokens(8), 99, 98, 97, 96], B, root);
    expect(h2[0]).toBe(h[0]!);
    expect(h2[2]).not.toBe(h[2]!);
    expect(bm.matchPrefix(h2)).toBe(2);
    const b: number[] = [];
    expect(bm.allocate(b, h2, 2, 1)).toBe(true);
    expect(b.slice(0, 2)).toEqual(a.slice(0, 2));
    expect(bm.stats().used).toBe(4);

    bm.release(a); // shared blocks stay used (b holds them); a's third goes to the cache
    expect(bm.stats()).toEqual({ total: 8, used: 3, cached: 1, empty: 4 });
    bm.release(b);
    expect(bm.stats()).toEqual({ total: 8, used: 0, cached: 3, empty: 5 });
    // b's private third block was never registered: recycled as empty.
    expect(bm.matchPrefix(h)).toBe(3);
    expect(bm.matchPrefix(h2)).toBe(2);
  });

  test("hits on cached (unreferenced) blocks count against free space", () => {
    const bm = createBlockManager({ numBlocks: 3, blockSize: B });
    const h = hashBlocks(tokens(8), B, root);
    const a: number[] = [];
    bm.allocate(a, h, 0, 2);
    bm.register(a, h, 0, 2);
    bm.release(a);
    expect(bm.stats()).toEqual({ total: 3, used: 0, cached: 2, empty: 1 });
    // Taking the 2 cached blocks leaves 1 free block: 2 fresh ones do not fit.
    expect(bm.canAllocate(0, h, 2, 2)).toBe(false);
    expect(bm.canAllocate(0, h, 2, 1)).toBe(true);
    const b: number[] = [];
    expect(bm.allocate(b, h, 2, 1)).toBe(true);
    expect(bm.drainEvents()).toEqual([{ kind: "stored", hashes: h, parent: 0n }]);
  });

  test("evicts least recently released cached blocks first, tail of a chain first, with events", () => {
    const bm = createBlockManager({ numBlocks: 4, blockSize: B });
    const hA = hashBlocks(tokens(8, 0), B, root);
    const hB = hashBlocks(tokens(8, 100), B, root);
    const a: number[] = [];
    const b: number[] = [];
    bm.allocate(a, hA, 0, 2);
    bm.allocate(b, hB, 0, 2);
    bm.register(a, hA, 0, 2);
    bm.register(b, hB, 0, 2);
    bm.drainEvents();
    bm.release(a); // released first: least recently used
    bm.release(b);
    expect(bm.stats().cached).toBe(4);

    const c: number[] = [];
    bm.allocate(c, [], 0, 1);
    expect(bm.drainEvents()).toEqual([{ kind: "evicted", hashes: [hA[1]!] }]);
    expect(bm.matchPrefix(hA)).toBe(1); // head survives the tail

    // Touching A's head (hit, then release) makes it most recent: B goes next.
    const d: number[] = [];
    bm.allocate(d, hA, 1, 0);
    bm.release(d);
    bm.allocate(c, [], 0, 2);
    expect(bm.drainEvents()).toEqual([{ kind: "evicted", hashes: [hB[1]!, hB[0]!] }]);
    expect(bm.matchPrefix(hA)).toBe(1);
    expect(bm.matchPrefix(hB)).toBe(0);
  });

  test("a hash computed twice keeps the first block; the duplicate is private", () => {
    const bm = createBlockManager({ numBlocks: 4, blockSize: B });
    const h = hashBlocks(tokens(4), B, root);
    const a: number[] = [];
    const b: number[] = [];
    bm.allocate(a, h, 0, 1);
    bm.allocate(b, h, 0, 1);
    bm.register(a, h, 0, 1);
    bm.register(b, h, 0, 1);
    expect(bm.drainEvents()).toEqual([{ kind: "stored", hashes: [h[0]!], parent: 0n }]);
    bm.release(b);
    expect(bm.stats()).toEqual({ total: 4, used: 1, cached: 0, empty: 3 });
  });

  test("truncate frees only the tail", () => {
    const bm = createBlockManager({ numBlocks: 4, blockSize: B });
    const a: number[] = [];
    bm.allocate(a, [], 0, 3);
    bm.truncate(a, 1);
    expect(a).toEqual([0]);
    expect(bm.stats().used).toBe(1);
  });

  test("snapshot lists every chain, parents before children, with branch parents", () => {
    const bm = createBlockManager({ numBlocks: 8, blockSize: B });
    const h = hashBlocks(tokens(12), B, root);
    const h2 = hashBlocks([...tokens(8), 50, 51, 52, 53, 54, 55, 56, 57], B, root);
    const a: number[] = [];
    const b: number[] = [];
    bm.allocate(a, h, 0, 3);
    bm.register(a, h, 0, 3);
    bm.allocate(b, h2, 2, 2);
    bm.register(b, h2, 0, 4);
    const snap = bm.snapshot();
    expect(snap).toEqual([
      { kind: "stored", hashes: [h[0]!, h[1]!, h[2]!], parent: 0n },
      { kind: "stored", hashes: [h2[2]!, h2[3]!], parent: h[1]! },
    ]);
    // The live events said the same thing.
    expect(bm.drainEvents()).toEqual(snap);
  });

  test("releasing more than held is a bug, reported loudly", () => {
    const bm = createBlockManager({ numBlocks: 2, blockSize: B });
    expect(() => bm.release([0])).toThrow(/released more often/);
  });
});
