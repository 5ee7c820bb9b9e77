/**
 * The zipf-skewed router bias of the random models: bias[e] = -zipf * ln(1 + rank(e)), ranks
 * from a seeded shuffle (selection only), as dispatch v1 biased vLLM's router.
 */
/** Bias per expert for a zipf exponent; ranks from a seeded shuffle. */
export function zipfBias(numExperts: number, zipf: number, seed: number): Float32Array {
  const rank = Array.from({ length: numExperts }, (_, i) => i);
  let s = seed >>> 0 || 1;
  for (let i = numExperts - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [rank[i], rank[j]] = [rank[j]!, rank[i]!];
  }
  return Float32Array.from(rank, (r) => -zipf * Math.log(1 + r));
}
