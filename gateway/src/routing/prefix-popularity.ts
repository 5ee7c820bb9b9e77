/**
 * How often each block has been requested lately, fleet-wide: a decayed
 * count per block hash, so "requests per second whose prompt contains this
 * block" is one lookup. A block on every prompt (a shared system prompt) is
 * hot; a block of one conversation is not. The cost policy uses it to tell
 * a prefix worth replicating from one worth following.
 *
 * Bounded: a block not requested for `maxIdleMs` (12 windows: its count has
 * decayed below 1e-5 of one request) is dropped, and at most `capacity`
 * blocks are kept, least recently requested dropped first. Without the idle
 * bound a gateway under prompts that share little held a million blocks
 * (~210 MB as they were stored then) for counts long decayed to nothing
 * (the GPU soak, docs/reliability.md "The GPU soak").
 * Pure bookkeeping: time comes in as `now` (ms).
 *
 * @example
 * const pop = createPrefixPopularity();
 * pop.record(hashes, now);
 * pop.rate(hashes[0], now); // requests per second through that block
 */
import { mapFront } from "@dispatch/common/src/map-front";

export interface PrefixPopularity {
  record(hashes: readonly bigint[], now: number): void;
  /** Recent requests per second whose prompt contains `hash`. */
  rate(hash: bigint, now: number): number;
  /** Recent requests per second in all (every `record` call), on the same decay. */
  totalRate(now: number): number;
  /** The rate one request recorded just now adds (1000 / windowMs). */
  readonly unitRate: number;
  readonly size: number;
  /** Count slots allocated: at most the capacity plus one request's blocks (tests). */
  readonly slotsAllocated: number;
}

export interface PrefixPopularityOptions {
  /** Time constant of the decay, ms. Default 10 s. */
  windowMs?: number;
  /** Most blocks tracked. Default 1,048,576. */
  capacity?: number;
  /** A block not requested for this long is forgotten (its rate reads 0). Default 12 x windowMs. */
  maxIdleMs?: number;
}

export function createPrefixPopularity(options: PrefixPopularityOptions = {}): PrefixPopularity {
  const tau = options.windowMs ?? 10_000;
  const capacity = options.capacity ?? 1_048_576;
  const maxIdle = options.maxIdleMs ?? 12 * tau;
  if (!(tau > 0) || !(capacity > 0) || !(maxIdle > 0)) throw new RangeError("windowMs, capacity and maxIdleMs must be > 0");
  // The hash's low 52 bits (a number key: no heap cell per block; two blocks that share them would
  // share a count, an estimate either way) -> slot; the slot's decayed count and last update (ms) in
  // typed arrays, so a record allocates no [count, ms] pair per block. A million blocks took ~210 MB as
  // bigint -> [count, ms] pairs, ~87 MB so. Map order is recency order.
  const slots = new Map<number, number>();
  const key = (h: bigint): number => Number(BigInt.asUintN(52, h));
  const front = mapFront(slots);
  let lastSweep = Number.NEGATIVE_INFINITY;
  let count = new Float64Array(1024);
  let at = new Float64Array(1024);
  const free: number[] = [];
  let used = 0;
  const slotFor = (): number => {
    const f = free.pop();
    if (f !== undefined) return f;
    if (used === count.length) {
      const grow = (old: Float64Array) => {
        const a = new Float64Array(old.length * 2);
        a.set(old);
        return a;
      };
      count = grow(count);
      at = grow(at);
    }
    return used++;
  };
  let total = 0;
  let totalAt = 0;
  const decay = (c: number, t: number, now: number) => c * Math.exp(-Math.max(0, now - t) / tau);
  return {
    record(hashes, now) {
      total = decay(total, totalAt, now) + 1;
      totalAt = Math.max(totalAt, now);
      for (const hash of hashes) {
        const h = key(hash);
        let slot = slots.get(h);
        if (slot === undefined) {
          slot = slotFor();
          count[slot] = 1;
        } else {
          count[slot] = decay(count[slot]!, at[slot]!, now) + 1;
          slots.delete(h);
        }
        at[slot] = now;
        slots.set(h, slot);
      }
      while (slots.size > capacity) free.push(front.shiftEntry()![1]);
      // Map order is recency order: the idle are at the front. A new iterator walks the deleted slots
      // there (common/src/map-front.ts), so this runs once per window, not per request.
      if (now - lastSweep >= tau) {
        lastSweep = now;
        for (const [k, slot] of slots) {
          if (now - at[slot]! <= maxIdle) break;
          slots.delete(k);
          free.push(slot);
        }
      }
    },
    rate(hash, now) {
      const slot = slots.get(key(hash));
      if (slot === undefined || now - at[slot]! > maxIdle) return 0;
      return (decay(count[slot]!, at[slot]!, now) / tau) * 1000;
    },
    totalRate(now) {
      return (decay(total, totalAt, now) / tau) * 1000;
    },
    unitRate: 1000 / tau,
    get slotsAllocated() {
      return used;
    },
    get size() {
      return slots.size;
    },
  };
}
