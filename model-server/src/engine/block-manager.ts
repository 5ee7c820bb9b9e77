/**
 * Paged KV block manager: pure bookkeeping of which physical KV blocks exist,
 * who holds them, and which full blocks are reusable by content (prefix cache).
 * It holds no tensors; the runner stores KV at the block ids handed out here.
 *
 * The rule:
 * - A block is *used* while at least one sequence holds it (`ref > 0`).
 * - A full block whose KV has been computed is *registered* under its chained
 *   hash (common/src/block-hash.ts). Registered blocks outlive their sequences:
 *   at `ref == 0` they sit in an LRU list (*cached*, reclaimable) and a later
 *   prompt with the same prefix takes them back instead of recomputing.
 * - Allocation takes never-registered (*empty*) blocks first, then evicts the
 *   least recently released cached block (a `evicted` KV event). Sequences
 *   release their blocks tail first, so a chain's tail is evicted before its head.
 * - A hash registered twice (two sequences computed the same block at once)
 *   keeps the first block; the second stays private and is recycled as empty.
 * - Blocks are registered only after their KV exists (after the forward step),
 *   so a block handed out by `acquirePrefix` is always complete. A sequence
 *   never writes into a block it shares.
 *
 * Pools (`pools: N`, for data-parallel attention over N ranks, where a
 * sequence's KV lives on rank `blockTable[0] mod N`): block ids are split into
 * N pools, pool(b) = b mod N, and every table keeps all its blocks in one pool,
 * the pool of its first block. A rank then stores only its pool's ids, at local
 * index floor(b / N). Each pool has its own empty stack and LRU, so allocation
 * stays O(1). An empty table starts in the pool of its prefix hits, or, without
 * hits, in the pool with the most available (empty + cached) blocks, ties to
 * the lowest index. `matchPrefix` counts hits only while they stay in the first
 * hit's pool (a chain can straddle pools when two pools computed the same block
 * at once: the first registration wins). With `pools: 1` (the default) all of
 * this reduces to one pool.
 *
 * @example
 * const bm = createBlockManager({ numBlocks: 64, blockSize: 16 });
 * const table: number[] = [];
 * const hits = bm.matchPrefix(hashes);              // leading cached blocks
 * if (bm.canAllocate(table.length, hashes, hits, 2)) bm.allocate(table, hashes, hits, 2);
 * bm.register(table, hashes, 0, 2);                 // after the step computed them
 * bm.release(table);                                // blocks stay cached for reuse
 *
 * const pooled = createBlockManager({ numBlocks: 64, blockSize: 16, pools: 2 });
 * pooled.allocate(table, [], 0, 3);                 // e.g. [0, 2, 4]: all in pool 0
 */
import { mapFront } from "@dispatch/common/src/map-front";

/** A change to the set of registered blocks, as published to routers. */
export type KvCacheEvent =
  | { kind: "stored"; hashes: bigint[]; parent: bigint }
  | { kind: "evicted"; hashes: bigint[] }
  | { kind: "cleared" };

export interface BlockStats {
  total: number;
  /** Held by at least one sequence. */
  used: number;
  /** Registered, held by nobody: reclaimable prefix cache. */
  cached: number;
  /** Never registered and unused. */
  empty: number;
}

export interface BlockManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  /** Number of pools the block ids are split into (1: one shared pool). */
  readonly pools: number;
  /**
   * How many leading `hashes` are registered (at most `maxBlocks`), counting
   * only blocks in the pool of the first one.
   */
  matchPrefix(hashes: readonly bigint[], maxBlocks?: number): number;
  /**
   * Whether `allocate` with these arguments would succeed. Pass the table itself
   * (or its length, which only a one-pool manager accepts when it is not 0).
   */
  canAllocate(table: readonly number[] | number, hashes: readonly bigint[], hits: number, fresh: number): boolean;
  /**
   * Append to `table`: first (only when `table` is empty) the `hits` cached
   * blocks of `hashes`, then `fresh` new blocks, all from the table's pool.
   * Returns false and changes nothing when that pool has not enough room.
   */
  allocate(table: number[], hashes: readonly bigint[], hits: number, fresh: number): boolean;
  /** Register `table[from..to)` under `hashes[from..to)` (their KV is now computed). */
  register(table: readonly number[], hashes: readonly bigint[], from: number, to: number): void;
  /** Drop the sequence's hold on every block of `table` (tail first) and empty it. */
  release(table: number[]): void;
  /** Release the blocks past the first `keep` (after a rejected speculative tail). */
  truncate(table: number[], keep: number): void;
  /** The pool of a table (of its first block); -1 for an empty table. */
  poolOf(table: readonly number[]): number;
  /** Totals over all pools. */
  stats(): BlockStats;
  /** The same counts per pool, indexed by pool. */
  poolStats(): BlockStats[];
  /** Events since the last call, oldest first. */
  drainEvents(): KvCacheEvent[];
  /** Every registered block as `stored` events, one per chain, parents before children. */
  snapshot(): KvCacheEvent[];
}

export interface BlockManagerOptions {
  numBlocks: number;
  blockSize: number;
  /** Pools the ids are split into (b mod pools); integer in [1, numBlocks]. Default 1. */
  pools?: number;
}

interface Block {
  ref: number;
  hash: bigint | null;
  /** Hash of the block before it in its chain; 0n for block 0 of a prompt. */
  parent: bigint;
}

export function createBlockManager(opts: BlockManagerOptions): BlockManager {
  const { numBlocks, blockSize } = opts;
  const pools = opts.pools ?? 1;
  if (!Number.isInteger(numBlocks) || numBlocks <= 0) throw new RangeError(`numBlocks must be a positive integer, got ${numBlocks}`);
  if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  if (!Number.isInteger(pools) || pools < 1 || pools > numBlocks) {
    throw new RangeError(`pools must be an integer from 1 to numBlocks (${numBlocks}), got ${pools}`);
  }

  const blocks: Block[] = Array.from({ length: numBlocks }, () => ({ ref: 0, hash: null, parent: 0n }));
  const byHash = new Map<bigint, number>();
  // Per pool: empty blocks as a stack, low ids on top (stable, readable tests).
  const empty: number[][] = Array.from({ length: pools }, () => []);
  for (let i = numBlocks - 1; i >= 0; i--) empty[i % pools]!.push(i);
  // Per pool: cached blocks in release order; the first key is the least recently used.
  const lru: Map<number, true>[] = Array.from({ length: pools }, () => new Map());
  // the least recently used in O(1) (a new iterator per eviction walked every deleted slot: ~38 us per block with a
  // full 50,620-block cache, bench/model-server/block-churn.ts)
  const lruFront = lru.map((m) => mapFront(m));
  const usedIn: number[] = new Array<number>(pools).fill(0);
  let used = 0;
  let events: KvCacheEvent[] = [];
  let pendingEvicted: bigint[] = [];

  function flushEvicted(): void {
    if (pendingEvicted.length === 0) return;
    events.push({ kind: "evicted", hashes: pendingEvicted });
    pendingEvicted = [];
  }

  function takeFresh(pool: number): number {
    const e = empty[pool]!.pop();
    if (e !== undefined) return e;
    const id = lruFront[pool]!.shift();
    if (id === undefined) throw new Error(`block manager: no free block in pool ${pool} (canAllocate was not checked)`);
    const b = blocks[id]!;
    byHash.delete(b.hash!);
    pendingEvicted.push(b.hash!);
    b.hash = null;
    b.parent = 0n;
    return id;
  }

  function hold(id: number): void {
    const b = blocks[id]!;
    if (b.ref === 0) {
      lru[id % pools]!.delete(id);
      used++;
      usedIn[id % pools]!++;
    }
    b.ref++;
  }

  function drop(id: number): void {
    const b = blocks[id]!;
    if (b.ref <= 0) throw new Error(`block manager: block ${id} released more often than held`);
    b.ref--;
    if (b.ref > 0) return;
    used--;
    usedIn[id % pools]!--;
    if (b.hash !== null) lru[id % pools]!.set(id, true);
    else empty[id % pools]!.push(id);
  }

  const available = (pool: number) => empty[pool]!.length + lru[pool]!.size;

  function matchPrefix(hashes: readonly bigint[], maxBlocks = hashes.length): number {
    const n = Math.min(hashes.length, maxBlocks);
    let i = 0;
    let pool = -1;
    for (; i < n; i++) {
      const id = byHash.get(hashes[i]!);
      if (id === undefined) break;
      if (pool < 0) pool = id % pools;
      else if (id % pools !== pool) break;
    }
    return i;
  }

  /**
   * The pool `allocate` would fill, or -1 when the hits are not all registered
   * in one pool: the table's, else the first hit's, else the most available.
   */
  function choosePool(tableLen: number, table: readonly number[] | null, hashes: readonly bigint[], hits: number): number {
    if (tableLen > 0) {
      if (table) return table[0]! % pools;
      if (pools === 1) return 0;
      throw new RangeError("block manager: canAllocate needs the table itself (not its length) when pools > 1");
    }
    if (hits > 0) {
      const id = byHash.get(hashes[0]!);
      return id === undefined ? -1 : id % pools;
    }
    let best = 0;
    for (let p = 1; p < pools; p++) if (available(p) > available(best)) best = p;
    return best;
  }

  /** Whether `pool` has room for the hits (on an empty table) and `fresh` blocks. */
  function fits(pool: number, tableLen: number, hashes: readonly bigint[], hits: number, fresh: number): boolean {
    if (pool < 0) return false;
    let reclaimedHits = 0;
    if (tableLen === 0) {
      for (let i = 0; i < hits; i++) {
        const id = byHash.get(hashes[i]!);
        if (id === undefined || id % pools !== pool) return false;
        if (blocks[id]!.ref === 0) reclaimedHits++;
      }
    }
    return available(pool) - reclaimedHits >= fresh;
  }

  function canAllocate(table: readonly number[] | number, hashes: readonly bigint[], hits: number, fresh: number): boolean {
    const tableLen = typeof table === "number" ? table : table.length;
    const pool = choosePool(tableLen, typeof table === "number" ? null : table, hashes, hits);
    return fits(pool, tableLen, hashes, hits, fresh);
  }

  function countsOf(pool: number): BlockStats {
    const total = Math.floor((numBlocks - 1 - pool) / pools) + 1;
    return { total, used: usedIn[pool]!, cached: lru[pool]!.size, empty: empty[pool]!.length };
  }

  return {
    numBlocks,
    blockSize,
    pools,
    matchPrefix,
    canAllocate,
    allocate(table, hashes, hits, fresh) {
      if (table.length > 0) hits = 0;
      const pool = choosePool(table.length, table, hashes, hits);
      if (!fits(pool, table.length, hashes, hits, fresh)) return false;
      for (let i = 0; i < hits; i++) {
        const id = byHash.get(hashes[i]!)!;
        hold(id);
        table.push(id);
      }
      for (let i = 0; i < fresh; i++) {
        const id = takeFresh(pool);
        hold(id);
        table.push(id);
      }
      flushEvicted();
      return true;
    },
    register(table, hashes, from, to) {
      let run: bigint[] = [];
      let runParent = 0n;
      const flushRun = () => {
        if (run.length > 0) events.push({ kind: "stored", hashes: run, parent: runParent });
        run = [];
      };
      for (let i = from; i < to; i++) {
        const id = table[i]!;
        const h = hashes[i]!;
        const b = blocks[id]!;
        if (b.hash !== null || byHash.has(h)) {
          flushRun();
          continue;
        }
        b.hash = h;
        b.parent = i > 0 ? hashes[i - 1]! : 0n;
        byHash.set(h, id);
        if (run.length === 0) runParent = b.parent;
        run.push(h);
      }
      flushRun();
    },
    release(table) {
      for (let i = table.length - 1; i >= 0; i--) drop(table[i]!);
      table.length = 0;
    },
    truncate(table, keep) {
      for (let i = table.length - 1; i >= keep; i--) drop(table[i]!);
      if (table.length > keep) table.length = keep;
    },
    poolOf(table) {
      return table.length > 0 ? table[0]! % pools : -1;
    },
    stats() {
      let cached = 0;
      let free = 0;
      for (let p = 0; p < pools; p++) {
        cached += lru[p]!.size;
        free += empty[p]!.length;
      }
      return { total: numBlocks, used, cached, empty: free };
    },
    poolStats() {
      return Array.from({ length: pools }, (_, p) => countsOf(p));
    },
    drainEvents() {
      flushEvicted();
      const out = events;
      events = [];
      return out;
    },
    snapshot() {
      const children = new Map<bigint, bigint[]>();
      const roots: bigint[] = [];
      for (const [h, id] of byHash) {
        const p = blocks[id]!.parent;
        if (p !== 0n && byHash.has(p)) {
          const list = children.get(p);
          if (list) list.push(h);
          else children.set(p, [h]);
        } else roots.push(h);
      }
      const out: KvCacheEvent[] = [];
      // Each chain follows the first child; siblings start chains of their own.
      const starts: bigint[] = [...roots].reverse();
      while (starts.length > 0) {
        let h = starts.pop()!;
        const chain: bigint[] = [];
        const parent = blocks[byHash.get(h)!]!.parent;
        for (;;) {
          chain.push(h);
          const kids = children.get(h);
          if (!kids || kids.length === 0) break;
          for (let k = kids.length - 1; k >= 1; k--) starts.push(kids[k]!);
          h = kids[0]!;
        }
        out.push({ kind: "stored", hashes: chain, parent });
      }
      return out;
    },
  };
}
