/**
 * A small seeded PRNG (mulberry32) with the picks the fuzzers need: the same
 * seed gives the same cases, so a failure names a seed and a case index that
 * reproduce it.
 *
 * @example
 * const r = createRng(42);
 * r.int(0, 9); r.pick(["a", "b"]); r.bool(); r.string(8);
 */
import { createSeededRand } from "@dispatch/common/src/seeded-rand";

export interface Rng {
  next(): number;
  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number;
  pick<T>(xs: readonly T[]): T;
  bool(p?: number): boolean;
  /** `n` characters drawn from `alphabet` (default: printable ASCII). */
  string(n: number, alphabet?: string): string;
  bytes(n: number): Uint8Array;
}

export function createRng(seed: number): Rng {
  const next = createSeededRand(seed);
  const ascii = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join("");
  const r: Rng = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (xs) => xs[Math.floor(next() * xs.length)]!,
    bool: (p = 0.5) => next() < p,
    string(n, alphabet = ascii) {
      let s = "";
      for (let i = 0; i < n; i++) s += alphabet[Math.floor(next() * alphabet.length)];
      return s;
    },
    bytes(n) {
      const b = new Uint8Array(n);
      for (let i = 0; i < n; i++) b[i] = Math.floor(next() * 256);
      return b;
    },
  };
  return r;
}
