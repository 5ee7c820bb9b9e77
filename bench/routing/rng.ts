/** Seeded randomness for the simulator: every run is reproducible from its seed. */
import { createSeededRand } from "@dispatch/common/src/seeded-rand";

/** mulberry32 returning [0, 1): the shared generator, so the simulator's seeds mean the same everywhere. */
export const createRng: (seed: number) => () => number = createSeededRand;

/** Exponential variate with the given mean. */
export function exponential(rand: () => number, mean: number): number {
  return -Math.log(1 - rand()) * mean;
}

/** Integer uniform in [lo, hi]. */
export function uniformInt(rand: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

/** Fisher-Yates shuffle in place. */
export function shuffle<T>(rand: () => number, xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

/** Sampler of ranks 0..n-1 with P(k) proportional to 1 / (k+1)^s. */
export function zipfSampler(rand: () => number, n: number, s: number): () => number {
  const cdf: number[] = [];
  let sum = 0;
  for (let k = 0; k < n; k++) {
    sum += 1 / Math.pow(k + 1, s);
    cdf.push(sum);
  }
  return () => {
    const x = rand() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

/** Deterministic 32-bit hash of a few integers, for seeding sub-streams. */
export function mixSeed(...xs: number[]): number {
  let h = 0x811c9dc5;
  for (const x of xs) {
    h ^= x >>> 0;
    h = Math.imul(h, 0x01000193) >>> 0;
    h ^= h >>> 13;
  }
  return h >>> 0;
}
