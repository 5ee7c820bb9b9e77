/**
 * How often each block has been requested lately, fleet-wide: a decayed
 * count per block hash, so "requests per second whose prompt contains this
 * block" is one lookup. A block on every prompt (a shared system prompt) is
 * hot; a block of one conversation is not. The cost policy uses it to tell
 * a prefix worth replicating from one worth following.
 *
 * Bounded: at most `capacity` blocks, least recently requested dropped first.
 * Pure bookkeeping: time comes in as `now` (ms).
 *
 * @example
 * const pop = createPrefixPopularity();
 * pop.record(hashes, now);
 * pop.rate(hashes[0], now); // requests per second through that block
 */
export interface PrefixPopularity {
  record(hashes: readonly bigint[], now: number): void;
  /** Recent requests per second whose prompt contains `hash`. */
  rate(hash: bigint, now: number): number;
  /** Recent requests per second in all (every `record` call), on the same decay. */
  totalRate(now: number): number;
  /** The rate one request recorded just now adds (1000 / windowMs). */
  readonly unitRate: number;
  readonly size: number;
}

export interface PrefixPopularityOptions {
  /** Time constant of the decay, ms. Default 10 s. */
  windowMs?: number;
  /** Most blocks tracked. Default 1,048,576. */
  capacity?: number;
}

export function createPrefixPopularity(options: PrefixPopularityOptions = {}): PrefixPopularity {
  const tau = options.windowMs ?? 10_000;
  const capacity = options.capacity ?? 1_048_576;
  if (!(tau > 0) || !(capacity > 0)) throw new RangeError("windowMs and capacity must be > 0");
  // hash -> [decayed count, last update ms]; Map order is recency order.
  const counts = new Map<bigint, [number, number]>();
  let total = 0;
  let totalAt = 0;
  const decay = (c: number, at: number, now: number) => c * Math.exp(-Math.max(0, now - at) / tau);
  return {
    record(hashes, now) {
      total = decay(total, totalAt, now) + 1;
      totalAt = Math.max(totalAt, now);
      for (const h of hashes) {
        const e = counts.get(h);
        const c = e ? e[0] * Math.exp(-Math.max(0, now - e[1]) / tau) + 1 : 1;
        counts.delete(h);
        counts.set(h, [c, now]);
      }
      let excess = counts.size - capacity;
      if (excess > 0) {
        for (const k of counts.keys()) {
          counts.delete(k);
          if (--excess <= 0) break;
        }
      }
    },
    rate(hash, now) {
      const e = counts.get(hash);
      if (!e) return 0;
      return ((e[0] * Math.exp(-Math.max(0, now - e[1]) / tau)) / tau) * 1000;
    },
    totalRate(now) {
      return (decay(total, totalAt, now) / tau) * 1000;
    },
    unitRate: 1000 / tau,
    get size() {
      return counts.size;
    },
  };
}
