/**
 * A per-sequence seeded PRNG (xoshiro128**, state expanded from a 64-bit seed
 * with SplitMix64). Each sequence draws only from its own generator, so the same
 * seed gives the same tokens whatever else shares the batch.
 *
 * @example
 * const rng = createRng(42n);
 * rng.next(); // a float in [0, 1), the same for every run with seed 42
 */

export interface Rng {
  /** Uniform float in [0, 1) with 32 bits of randomness. */
  next(): number;
}

const MASK64 = (1n << 64n) - 1n;

function splitMix64(state: bigint): [bigint, bigint] {
  const s = (state + 0x9e3779b97f4a7c15n) & MASK64;
  let z = s;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return [s, z ^ (z >> 31n)];
}

/** A generator seeded with `seed` (u64); undefined draws a random seed. */
export function createRng(seed?: bigint): Rng {
  let s = seed ?? BigInt.asUintN(64, BigInt(Math.floor(Math.random() * 2 ** 53)) ^ (BigInt(Date.now()) << 11n));
  s = BigInt.asUintN(64, s);
  const st = new Uint32Array(4);
  for (let i = 0; i < 2; i++) {
    const [next, out] = splitMix64(s);
    s = next;
    st[2 * i] = Number(out & 0xffffffffn);
    st[2 * i + 1] = Number(out >> 32n);
  }
  let a = st[0]!, b = st[1]!, c = st[2]!, d = st[3]!;
  if ((a | b | c | d) === 0) a = 1;
  return {
    next() {
      const result = Math.imul(rotl(Math.imul(b, 5) >>> 0, 7), 9) >>> 0;
      const t = (b << 9) >>> 0;
      c = (c ^ a) >>> 0;
      d = (d ^ b) >>> 0;
      b = (b ^ c) >>> 0;
      a = (a ^ d) >>> 0;
      c = (c ^ t) >>> 0;
      d = rotl(d, 11);
      return result / 4294967296;
    },
  };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/**
 * The GPU sampler's draw (native-cuda/src/sampling.cu `uniform01`): a counter-based hash of
 * (seed, step), so a sequence's draw for its n-th output token depends on nothing else. The
 * engine uses it on runners that sample on the GPU for the steps it samples on the host, so a
 * seeded sequence draws the same u for a step whichever side samples it.
 *
 * @example
 * counterUniform(7, 3) === counterUniform(7, 3); // a float in [0, 1) with 24 bits
 */
export function counterUniform(seed: number, step: number): number {
  let z = BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + BigInt(step) + 0x632be59bd9b4e019n);
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
  z ^= z >> 31n;
  return Number(z >> 40n) / 16777216;
}

/** A request's 64-bit seed folded into the integer range a double holds exactly (the GPU sampler's seed). */
export function gpuSeed(seed: bigint | undefined): number {
  if (seed === undefined) return Math.floor(Math.random() * 2 ** 53);
  const s = BigInt.asUintN(64, seed);
  return Number(BigInt.asUintN(53, s ^ (s >> 53n)));
}
