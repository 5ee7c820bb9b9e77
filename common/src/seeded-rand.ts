/**
 * A seeded [0, 1) generator (mulberry32): small, fast, and the same sequence
 * for the same seed on every run, so routing policies, the routing simulator,
 * the serving bench and the fuzzers are reproducible. One copy for all of
 * them: changing it changes every seeded result (simulator tables, fuzz cases).
 *
 * @example
 * const rand = createSeededRand(42);
 * rand(); // a float in [0, 1), the same for every run with seed 42
 */
export function createSeededRand(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
