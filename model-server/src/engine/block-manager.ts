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
 * @example
 * const bm = createBlockManager({ numBlocks: 64, blockSize: 16 });
 * const table: number[] = [];
 * const hits = bm.matchPrefix(hashes);              // leading cached blocks
 * if (bm.canAllocate(table.length, hashes, hits, 2)) bm.allocate(table, hashes, hits, 2);
 * bm.register(table, hashes, 0, 2);                 // after the step computed them
 * bm.release(table);                                // blocks stay cached for reuse
 */

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
  /** How many leading `hashes` are registered (at most `maxBlocks`). */
  matchPrefix(hashes: readonly bigint[], maxBlocks?: number): number;
  /** Whether `allocate` with these arguments would succeed. */
  canAllocate(tableLen: number, hashes: readonly bigint[], hits: number, fresh: number): boolean;
  /**
   * Append to `table`: first (only when `table` is empty) the `hits` cached
   * blocks of `hashes`, then `fresh` new blocks. Returns false and changes
   * nothing when there is not enough room.
   */
  allocate(table: number[], hashes: readonly bigint[], hits: number, fresh: number): boolean;
  /** Register `table[from..to)` under `hashes[from..to)` (their KV is now computed). */
  register(table: readonly number[], hashes: readonly bigint[], from: number, to: number): void;
  /** Drop the sequence's hold on every block of `table` (tail first) and empty it. */
  release(table: number[]): void;
  /** Release the blocks past the first `keep` (after a rejected speculative tail). */
  truncate(table: number[], keep: number): void;
  stats(): BlockStats;
  /** Events since the last call, oldest first. */
  drainEvents(): KvCacheEvent[];
  /** Every registered block as `stored` events, one per chain, parents before children. */
  snapshot(): KvCacheEvent[];
}

export interface BlockManagerOptions {
  numBlocks: number;
  blockSize: number;
}

interface Block {
  ref: number;
  hash: bigint | null;
  /** Hash of the block before it in its chain; 0n for block 0 of a prompt. */
  parent: bigint;
}

export function createBlockManager(opts: BlockManagerOptions): BlockManager {
  const { numBlocks, blockSize } = opts;
  if (!Number.isInteger(numBlocks) || numBlocks <= 0) throw new RangeError(`numBlocks must be a positive integer, got ${numBlocks}`);
  if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);

  const blocks: Block[] = Array.from({ length: numBlocks }, () => ({ ref: 0, hash: null, parent: 0n }));
  const byHash = new Map<bigint, number>();
  // Empty blocks as a stack, low ids on top (stable, readable tests).
  const empty: number[] = [];
  for (let i = numBlocks - 1; i >= 0; i--) empty.push(i);
  // Cached blocks in release order: the first key is the least recently used.
  const lru = new Map<number, true>();
  let used = 0;
  let events: KvCacheEvent[] = [];
  let pendingEvicted: bigint[] = [];

  function flushEvicted(): void {
    if (pendingEvicted.length === 0) return;
    events.push({ kind: "evicted", hashes: pendingEvicted });
    pendingEvicted = [];
  }

  function takeFresh(): number {
    const e = empty.pop();
    if (e !== undefined) return e;
    const first = lru.keys().next();
    if (first.done) throw new Error("block manager: no free block (canAllocate was not checked)");
    const id = first.value;
    lru.delete(id);
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
      lru.delete(id);
      used++;
    }
    b.ref++;
  }

  function drop(id: number): void {
    const b = blocks[id]!;
    if (b.ref <= 0) throw new Error(`block manager: block ${id} released more often than held`);
    b.ref--;
    if (b.ref > 0) return;
    used--;
    if (b.hash !== null) lru.set(id, true);
    else empty.push(id);
  }

  function matchPrefix(hashes: readonly bigint[], maxBlocks = hashes.length): number {
    const n = Math.min(hashes.length, maxBlocks);
    let i = 0;
    while (i < n && byHash.has(hashes[i]!)) i++;
    return i;
  }

  function canAllocate(tableLen: number, hashes: readonly bigint[], hits: number, fresh: number): boolean {
    let reclaimedHits = 0;
    if (tableLen === 0) {
      for (let i = 0; i < hits; i++) {
        const id = byHash.get(hashes[i]!);
        if (id === undefined) return false;
        if (blocks[id]!.ref === 0) reclaimedHits++;
      }
    }
    return empty.length + lru.size - reclaimedHits >= fresh;
  }

  return {
    numBlocks,
    blockSize,
    matchPrefix,
    canAllocate,
    allocate(table, hashes, hits, fresh) {
      if (table.length > 0) hits = 0;
      if (!canAllocate(table.length, hashes, hits, fresh)) return false;
      for (let i = 0; i < hits; i++) {
        const id = byHash.get(hashes[i]!)!;
        hold(id);
        table.push(id);
      }
      for (let i = 0; i < fresh; i++) {
        const id = takeFresh();
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
    stats() {
      return { total: numBlocks, used, cached: lru.size, empty: empty.length };
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
