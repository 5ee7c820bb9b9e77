import { describe, expect, test } from "bun:test";
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { createBlockManager } from "./block-manager";
import { createRng } from "./rng";

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

describe("block manager with pools", () => {
  const poolOfAll = (table: readonly number[], pools: number) => new Set(table.map((b) => b % pools));

  test("rejects bad pool counts clearly", () => {
    for (const pools of [0, -1, 1.5, 9, Number.NaN]) {
      expect(() => createBlockManager({ numBlocks: 8, blockSize: B, pools })).toThrow(/pools must be an integer from 1 to numBlocks \(8\)/);
    }
    expect(createBlockManager({ numBlocks: 8, blockSize: B, pools: 8 }).pools).toBe(8);
    expect(createBlockManager({ numBlocks: 8, blockSize: B }).pools).toBe(1);
    // A table's length says nothing about its pool: with pools, canAllocate needs the table.
    const bm = createBlockManager({ numBlocks: 8, blockSize: B, pools: 2 });
    expect(() => bm.canAllocate(1, [], 0, 1)).toThrow(/needs the table itself/);
  });

  test("a table takes every block from one pool; a new table goes to the most available pool, ties to the lowest", () => {
    const bm = createBlockManager({ numBlocks: 8, blockSize: B, pools: 2 });
    const a: number[] = [];
    expect(bm.allocate(a, [], 0, 3)).toBe(true); // tie 4/4 -> pool 0
    expect(a).toEqual([0, 2, 4]);
    const b: number[] = [];
    expect(bm.allocate(b, [], 0, 1)).toBe(true); // 1 vs 4 available -> pool 1
    expect(b).toEqual([1]);
    expect(bm.allocate(a, [], 0, 1)).toBe(true);
    expect(a).toEqual([0, 2, 4, 6]);
    expect(bm.poolOf(a)).toBe(0);
    expect(bm.poolOf(b)).toBe(1);
    expect(bm.poolOf([])).toBe(-1);
    expect(bm.poolStats()).toEqual([
      { total: 4, used: 4, cached: 0, empty: 0 },
      { total: 4, used: 1, cached: 0, empty: 3 },
    ]);
    expect(bm.stats()).toEqual({ total: 8, used: 5, cached: 0, empty: 3 });
  });

  test("a full pool refuses its tables without changing anything, while a new table goes to the empty pool", () => {
    const bm = createBlockManager({ numBlocks: 8, blockSize: B, pools: 2 });
    const a: number[] = [];
    expect(bm.allocate(a, [], 0, 4)).toBe(true);
    expect(a).toEqual([0, 2, 4, 6]); // pool 0 is full
    // Pool 1 holds a cached chain and empty blocks.
    const hC = hashBlocks(tokens(8, 200), B, root);
    const c: number[] = [];
    expect(bm.allocate(c, hC, 0, 2)).toBe(true);
    expect(c).toEqual([1, 3]);
    bm.register(c, hC, 0, 2);
    bm.release(c);
    bm.drainEvents();
    const before = { stats: bm.stats(), pools: bm.poolStats() };
    expect(before.pools).toEqual([
      { total: 4, used: 4, cached: 0, empty: 0 },
      { total: 4, used: 0, cached: 2, empty: 2 },
    ]);
    expect(bm.canAllocate(a, [], 0, 1)).toBe(false);
    expect(bm.allocate(a, [], 0, 1)).toBe(false);
    expect(a).toEqual([0, 2, 4, 6]);
    expect(bm.stats()).toEqual(before.stats);
    expect(bm.poolStats()).toEqual(before.pools);
    expect(bm.drainEvents()).toEqual([]); // pool 1's cache was not touched for it
    expect(bm.matchPrefix(hC)).toBe(2);
    // A new table goes to pool 1, empty blocks first, then its cached chain, tail first.
    const d: number[] = [];
    expect(bm.canAllocate(0, [], 0, 4)).toBe(true);
    expect(bm.allocate(d, [], 0, 4)).toBe(true);
    expect(d).toEqual([5, 7, 3, 1]);
    expect(bm.drainEvents()).toEqual([{ kind: "evicted", hashes: [hC[1]!, hC[0]!] }]);
    expect(bm.allocate([], [], 0, 1)).toBe(false);
  });

  test("prefix hits stay in their pool: fresh blocks come from the hits' pool", () => {
    const bm = createBlockManager({ numBlocks: 12, blockSize: B, pools: 3 });
    const h = hashBlocks(tokens(12), B, root);
    const a: number[] = [];
    bm.allocate(a, h, 0, 2); // tie 4/4/4 -> pool 0
    expect(a).toEqual([0, 3]);
    bm.register(a, h, 0, 2);
    bm.release(a);
    const y: number[] = [];
    bm.allocate(y, [], 0, 1); // tie again -> pool 0, an empty block first
    expect(y).toEqual([6]);
    // Pool 0 now has 3 available, pools 1 and 2 have 4: the hits still decide.
    expect(bm.matchPrefix(h)).toBe(2);
    const b: number[] = [];
    expect(bm.allocate(b, h, 2, 1)).toBe(true);
    expect(b).toEqual([0, 3, 9]);
    expect(bm.canAllocate(0, h, 2, 1)).toBe(false); // the hits' pool is full now
    expect(bm.canAllocate(b, h, 0, 1)).toBe(false);
    expect(bm.allocate(b, h, 0, 1)).toBe(false);
    expect(b).toEqual([0, 3, 9]);
    expect(bm.canAllocate(0, [], 0, 4)).toBe(true); // other pools have room
  });

  test("a hash chain straddling pools is cut at the pool change", () => {
    const bm = createBlockManager({ numBlocks: 8, blockSize: B, pools: 2 });
    const h = hashBlocks(tokens(12), B, root);
    // Two sequences compute the same prompt at once, in different pools.
    const a: number[] = [];
    const b: number[] = [];
    bm.allocate(a, h, 0, 2);
    bm.allocate(b, h, 0, 3);
    expect(bm.poolOf(a)).toBe(0);
    expect(bm.poolOf(b)).toBe(1);
    bm.register(a, h, 0, 2); // first: h0, h1 in pool 0
    bm.register(b, h, 0, 3); // h0, h1 taken: b's stay private; h2 lands in pool 1
    expect(bm.drainEvents()).toEqual([
      { kind: "stored", hashes: [h[0]!, h[1]!], parent: 0n },
      { kind: "stored", hashes: [h[2]!], parent: h[1]! },
    ]);
    expect(bm.matchPrefix(h)).toBe(2);
    expect(bm.matchPrefix(h, 1)).toBe(1);
    expect(bm.matchPrefix(h.slice(2))).toBe(1); // alone, h2 is a hit in its own pool
    expect(bm.canAllocate(0, h, 3, 0)).toBe(false);
    const c: number[] = [];
    expect(bm.allocate(c, h, 3, 0)).toBe(false);
    expect(c).toEqual([]);
    expect(bm.allocate(c, h, 2, 1)).toBe(true);
    expect(c).toEqual([0, 2, 4]);
  });

  test("eviction takes only the needed pool's cached blocks, least recently released first", () => {
    const bm = createBlockManager({ numBlocks: 8, blockSize: B, pools: 2 });
    const hs = [0, 100, 200, 300].map((o) => hashBlocks(tokens(8, o), B, root));
    const t: number[][] = [[], [], [], []];
    for (let i = 0; i < 4; i++) {
      expect(bm.allocate(t[i]!, hs[i]!, 0, 2)).toBe(true);
      bm.register(t[i]!, hs[i]!, 0, 2);
    }
    expect(t).toEqual([[0, 2], [1, 3], [4, 6], [5, 7]]);
    for (const i of [1, 0, 3, 2]) bm.release(t[i]!);
    bm.drainEvents();
    expect(bm.poolStats().map((s) => s.cached)).toEqual([4, 4]);
    // A hit-less table (tie -> pool 0) evicts pool 0's least recent: table 0's tail, then its head.
    const e: number[] = [];
    bm.allocate(e, [], 0, 3);
    expect(e).toEqual([2, 0, 6]);
    expect(bm.drainEvents()).toEqual([{ kind: "evicted", hashes: [hs[0]![1]!, hs[0]![0]!, hs[2]![1]!] }]);
    // Pool 1 kept everything; a table hitting table 3's chain evicts pool 1's least recent (table 1's tail).
    expect(bm.matchPrefix(hs[1]!)).toBe(2);
    const f: number[] = [];
    expect(bm.allocate(f, hs[3]!, 2, 1)).toBe(true);
    expect(f).toEqual([5, 7, 3]);
    expect(bm.drainEvents()).toEqual([{ kind: "evicted", hashes: [hs[1]![1]!] }]);
    expect(bm.matchPrefix(hs[2]!)).toBe(1);
  });

  test("numBlocks not a multiple of pools: uneven pools, ids below numBlocks only", () => {
    const bm = createBlockManager({ numBlocks: 7, blockSize: B, pools: 3 });
    expect(bm.poolStats().map((s) => s.total)).toEqual([3, 2, 2]);
    const a: number[] = [];
    const b: number[] = [];
    const c: number[] = [];
    const d: number[] = [];
    expect(bm.allocate(a, [], 0, 3)).toBe(true);
    expect(a).toEqual([0, 3, 6]);
    expect(bm.canAllocate(0, [], 0, 3)).toBe(false);
    expect(bm.allocate(b, [], 0, 3)).toBe(false);
    expect(bm.allocate(b, [], 0, 2)).toBe(true);
    expect(bm.allocate(c, [], 0, 2)).toBe(true);
    expect([b, c]).toEqual([[1, 4], [2, 5]]);
    expect(bm.allocate(d, [], 0, 1)).toBe(false);
    expect(bm.stats()).toEqual({ total: 7, used: 7, cached: 0, empty: 0 });
  });

  // Random operations: tables never leave their pool, a fresh block is never held by another
  // table, hit-less tables start in the roomiest pool, and the counts always add up.
  for (const pools of [1, 2, 3]) {
    test(`random operations keep every table in one pool (pools ${pools})`, () => {
      const rng = createRng(BigInt(pools * 7919));
      const int = (lo: number, hi: number) => lo + Math.floor(rng.next() * (hi - lo + 1));
      const numBlocks = 29 + pools; // 31 and 32: not multiples of 2 and 3
      const bm = createBlockManager({ numBlocks, blockSize: B, pools });
      const prefixes = Array.from({ length: 4 }, (_, i) => tokens(int(0, 16), 1000 * i));
      type T = { table: number[]; hashes: bigint[] };
      const live: T[] = [];
      const holders = () => {
        const n = new Map<number, number>();
        for (const t of live) for (const b of t.table) n.set(b, (n.get(b) ?? 0) + 1);
        return n;
      };
      let straddles = 0;
      let hitAllocs = 0;
      let refusedWithRoomElsewhere = 0;
      for (let step = 0; step < 4000; step++) {
        const op = int(0, 9);
        if (op <= 2 || live.length === 0) {
          const prompt = [...prefixes[int(0, 3)]!, ...tokens(int(1, 12), 100 * int(0, 5))];
          const hashes = hashBlocks(prompt, B, root);
          const all = bm.matchPrefix(hashes);
          const hits = int(0, all);
          const fresh = int(hits === 0 ? 1 : 0, 4);
          const room = bm.poolStats().map((s) => s.empty + s.cached);
          const table: number[] = [];
          const before = holders();
          const ok = bm.allocate(table, hashes, hits, fresh);
          if (!ok) {
            expect(table).toEqual([]);
            if (hits === 0) expect(Math.max(...room)).toBeLessThan(fresh);
            continue;
          }
          if (hits === 0) expect(bm.poolOf(table)).toBe(room.indexOf(Math.max(...room)));
          else hitAllocs++;
          for (const b of table.slice(hits)) expect(before.has(b)).toBe(false);
          live.push({ table, hashes });
        } else if (op <= 4) {
          const t = live[int(0, live.length - 1)]!;
          const before = holders();
          const len = t.table.length;
          const can = bm.canAllocate(t.table, t.hashes, 0, 1);
          const room = bm.poolStats().map((s) => s.empty + s.cached);
          expect(can).toBe(len === 0 ? Math.max(...room) >= 1 : room[bm.poolOf(t.table)]! >= 1);
          expect(bm.allocate(t.table, t.hashes, 0, 1)).toBe(can);
          if (can) expect(before.has(t.table[len]!)).toBe(false);
          else expect(t.table.length).toBe(len);
          if (!can && Math.max(...room) >= 1) refusedWithRoomElsewhere++;
        } else if (op <= 6) {
          const t = live[int(0, live.length - 1)]!;
          const n = Math.min(t.table.length, t.hashes.length);
          bm.register(t.table, t.hashes, 0, n);
        } else if (op <= 8) {
          bm.release(live.splice(int(0, live.length - 1), 1)[0]!.table);
        } else {
          const t = live[int(0, live.length - 1)]!;
          bm.truncate(t.table, int(0, t.table.length));
        }
        // The chain cut: matchPrefix counts the longest run of hits in one pool, no more.
        for (const p of prefixes) {
          const h = hashBlocks([...p, 1, 2, 3], B, root);
          const n = bm.matchPrefix(h);
          expect(bm.canAllocate(0, h, n, 0)).toBe(true);
          if (n < h.length) expect(bm.canAllocate(0, h, n + 1, 0)).toBe(false);
          let registered = 0;
          while (registered < h.length && bm.matchPrefix([h[registered]!]) === 1) registered++;
          if (registered > n) straddles++;
        }
        for (const t of live) expect(poolOfAll(t.table, pools).size).toBeLessThanOrEqual(1);
        const held = holders();
        const st = bm.stats();
        const ps = bm.poolStats();
        expect(st.used).toBe(held.size);
        expect(st.used + st.cached + st.empty).toBe(numBlocks);
        for (const [p, s] of ps.entries()) {
          expect(s.used + s.cached + s.empty).toBe(s.total);
          expect(s.used).toBe([...held.keys()].filter((b) => b % pools === p).length);
        }
        expect(ps.reduce((n, s) => n + s.cached, 0)).toBe(st.cached);
      }
      expect(hitAllocs).toBeGreaterThan(50);
      // The cut and the per-pool refusal were both exercised (neither exists with one pool).
      expect(straddles > 0).toBe(pools > 1);
      expect(refusedWithRoomElsewhere > 0).toBe(pools > 1);
      for (const t of live) bm.release(t.table);
      const st = bm.stats();
      expect(st.used).toBe(0);
      expect(st.cached + st.empty).toBe(numBlocks);
    });
  }
});
