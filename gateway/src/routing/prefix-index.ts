/**
 * Which backend holds which KV blocks, keyed by chained block hash
 * (common/src/block-hash.ts), so "how many leading prompt blocks does backend
 * B hold" is one walk down the prompt's hashes.
 *
 * Two modes per backend:
 * - exact: fed by the backend's own KV events (`BlocksStored` / `BlocksEvicted`
 *   / `CacheCleared`), so the index is what the server really holds
 *   (optionally, with `pendingTtlMs`, plus blocks routed there but not yet
 *   reported stored).
 * - approximate: for foreign backends (vLLM / SGLang over HTTP) that publish
 *   nothing. We record what we routed there and assume it stays cached for at
 *   most `approxTtlMs`, in an LRU bounded to `approxCapacityBlocks` per backend
 *   (set it near the backend's real KV capacity: it evicts LRU too).
 *
 * Pure bookkeeping: time comes in as `now` (ms), nothing runs by itself.
 *
 * @example
 * const index = createPrefixIndex();
 * index.setMode("a", "exact");
 * index.applyStored("a", [h0, h1]);
 * index.match([h0, h1, h2], ["a", "b"], Date.now()); // [2, 0]
 */

import { mapFront, type MapFront } from "@dispatch/common/src/map-front";

export type IndexMode = "exact" | "approximate";

export interface PrefixIndexOptions {
  /** Approximate mode: most blocks remembered per backend (LRU beyond). Default 262,144. */
  approxCapacityBlocks?: number;
  /** Approximate mode: a routed block is believed cached this long after its last use. Default 10 min. */
  approxTtlMs?: number;
  /**
   * Exact mode: how long a routed-but-unconfirmed block counts as held; 0
   * (this index's default) turns these pending entries off, so the index is
   * exactly what the servers reported. The router turns them on (10 s) for
   * the dispatch policy and skips them on hot prefixes (`match`'s
   * `pendingFrom`, router.ts `pendingHotShare`): a burst of requests on a
   * new prefix then follows the first one instead of scattering cold
   * prefills before its blocks are reported, while a prefix every request
   * shares still spreads (docs/routing.md).
   */
  pendingTtlMs?: number;
  /** Exact mode: hard bound per backend against a runaway event stream. Default 4,194,304. */
  exactCapacityBlocks?: number;
}

export interface PrefixIndex {
  /** Declare a backend's mode (default: approximate). Switching clears what it held. */
  setMode(backendId: string, mode: IndexMode): void;
  mode(backendId: string): IndexMode;
  /** Exact mode: the backend stored these blocks. */
  applyStored(backendId: string, hashes: readonly bigint[]): void;
  /** Exact mode: the backend evicted these blocks. */
  applyEvicted(backendId: string, hashes: readonly bigint[]): void;
  /** Forget everything the backend holds (cache cleared, new snapshot, restart). */
  clear(backendId: string): void;
  /** A request with these prompt blocks was routed to the backend at `now`. */
  recordRouted(backendId: string, hashes: readonly bigint[], now: number): void;
  removeBackend(backendId: string): void;
  /**
   * Leading blocks of `hashes` each backend holds, aligned with `backendIds`.
   * Pending entries (exact mode) count only for blocks at index >= `pendingFrom`
   * (default 0: all of them).
   */
  match(hashes: readonly bigint[], backendIds: readonly string[], now: number, pendingFrom?: number): number[];
  /**
   * Blocks the index holds for the backend, O(1): expired entries count until
   * the next `prune`, which the router runs every few seconds.
   */
  size(backendId: string): number;
  /** Drop expired approximate / pending entries (call it now and then; match ignores them anyway). */
  prune(now: number): void;
}

interface BackendBlocks {
  mode: IndexMode;
  /** hash -> last use (ms). Map order is LRU order: oldest first (approximate mode). */
  blocks: Map<bigint, number>;
  /** Exact mode only: routed, not yet confirmed stored. hash -> routed at (ms). */
  pending: Map<bigint, number>;
  /** Their oldest entries in O(1) (common/src/map-front.ts). */
  blocksFront: MapFront<bigint, number>;
  pendingFront: MapFront<bigint, number>;
}

export function createPrefixIndex(options: PrefixIndexOptions = {}): PrefixIndex {
  const approxCapacity = positive(options.approxCapacityBlocks ?? 262_144, "approxCapacityBlocks");
  const approxTtl = positive(options.approxTtlMs ?? 600_000, "approxTtlMs");
  const pendingTtl = options.pendingTtlMs ?? 0;
  if (!(pendingTtl >= 0)) throw new RangeError(`pendingTtlMs must be >= 0, got ${pendingTtl}`);
  const exactCapacity = positive(options.exactCapacityBlocks ?? 4_194_304, "exactCapacityBlocks");
  const backends = new Map<string, BackendBlocks>();

  function entry(id: string): BackendBlocks {
    let b = backends.get(id);
    if (!b) {
      const blocks = new Map<bigint, number>();
      const pending = new Map<bigint, number>();
      b = { mode: "approximate", blocks, pending, blocksFront: mapFront(blocks), pendingFront: mapFront(pending) };
      backends.set(id, b);
    }
    return b;
  }

  function holds(b: BackendBlocks, h: bigint, now: number, pendingOk: boolean): boolean {
    if (b.mode === "exact") {
      if (b.blocks.has(h)) return true;
      if (!pendingOk) return false;
      const at = b.pending.get(h);
      return at !== undefined && now - at <= pendingTtl;
    }
    const at = b.blocks.get(h);
    return at !== undefined && now - at <= approxTtl;
  }

  function trim(map: Map<bigint, number>, front: MapFront<bigint, number>, capacity: number): void {
    while (map.size > capacity) front.shift();
  }

  return {
    setMode(id, mode) {
      const b = entry(id);
      if (b.mode === mode) return;
      b.mode = mode;
      b.blocks.clear();
      b.pending.clear();
    },
    mode: (id) => backends.get(id)?.mode ?? "approximate",
    applyStored(id, hashes) {
      const b = entry(id);
      for (const h of hashes) {
        b.blocks.set(h, 0);
        b.pending.delete(h);
      }
      trim(b.blocks, b.blocksFront, exactCapacity);
    },
    applyEvicted(id, hashes) {
      const b = backends.get(id);
      if (!b) return;
      for (const h of hashes) {
        b.blocks.delete(h);
        b.pending.delete(h);
      }
    },
    clear(id) {
      const b = backends.get(id);
      if (!b) return;
      b.blocks.clear();
      b.pending.clear();
    },
    recordRouted(id, hashes, now) {
      const b = entry(id);
      if (b.mode === "exact") {
        if (pendingTtl === 0) return;
        for (const h of hashes) if (!b.blocks.has(h)) b.pending.set(h, now);
        trim(b.pending, b.pendingFront, exactCapacity);
        return;
      }
      // Re-insert to move each block to the most-recently-used end.
      for (const h of hashes) {
        b.blocks.delete(h);
        b.blocks.set(h, now);
      }
      trim(b.blocks, b.blocksFront, approxCapacity);
    },
    removeBackend(id) {
      backends.delete(id);
    },
    match(hashes, ids, now, pendingFrom = 0) {
      return ids.map((id) => {
        const b = backends.get(id);
        if (!b) return 0;
        let n = 0;
        while (n < hashes.length && holds(b, hashes[n]!, now, n >= pendingFrom)) n++;
        return n;
      });
    },
    size(id) {
      const b = backends.get(id);
      if (!b) return 0;
      return b.blocks.size + b.pending.size;
    },
    prune(now) {
      for (const b of backends.values()) {
        const map = b.mode === "exact" ? b.pending : b.blocks;
        const ttl = b.mode === "exact" ? pendingTtl : approxTtl;
        for (const [h, at] of map) if (now - at > ttl) map.delete(h);
      }
    },
  };
}

function positive(v: number, name: string): number {
  if (!(v > 0)) throw new RangeError(`${name} must be > 0, got ${v}`);
  return v;
}
