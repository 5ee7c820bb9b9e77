/**
 * Expected number of distinct experts a decode step of `batch` tokens reads from one MoE layer:
 * the weight bytes of a step, hence its roofline, depend on it.
 *
 * Uniform routing (no bias): each token picks topK of E without replacement, so an expert is
 * missed by all tokens with probability (1 - topK/E)^batch.
 *
 * Zipf-skewed routing as the random models make it (random-weights.ts: selection by
 * logit + bias[e], bias[e] = -zipf * ln(1 + rank e)): the router's weights are uniform with
 * variance 1/H and its input is RMS-normed (mean square 1), so each logit is close to a unit
 * normal, independent across experts and tokens. The expectation has no closed form, so it is
 * estimated by a seeded Monte Carlo over that model of the logits. It depends on the multiset
 * of biases only (not on which expert holds which rank), so one estimate serves every layer.
 */
import { zipfBias } from "./zipf-bias";

export interface ExpectedExpertsOptions {
  /** zipf exponent of the router bias; 0 or absent = uniform */
  zipf?: number;
  /** Monte Carlo trials (zipf only); the estimate's standard error falls as 1/sqrt(trials) */
  trials?: number;
}

export function expectedDistinctExperts(numExperts: number, topK: number, batch: number, o: ExpectedExpertsOptions = {}): number {
  if (!(numExperts > 0) || !(topK > 0) || topK > numExperts) throw new Error(`expectedDistinctExperts: need 0 < topK (${topK}) <= numExperts (${numExperts})`);
  if (!Number.isInteger(batch) || batch < 0) throw new Error(`expectedDistinctExperts: batch must be a non-negative integer, got ${batch}`);
  if (!o.zipf) return numExperts * (1 - (1 - topK / numExperts) ** batch);
  const trials = o.trials ?? 64;
  // every MoE layer of a model asks the same question: estimate it once
  const key = `${numExperts}/${topK}/${batch}/${o.zipf}/${trials}`;
  let v = estimates.get(key);
  if (v === undefined) {
    v = monteCarlo(numExperts, topK, batch, zipfBias(numExperts, o.zipf, 1), trials);
    estimates.set(key, v);
  }
  return v;
}

const estimates = new Map<string, number>();

function monteCarlo(E: number, k: number, batch: number, bias: Float32Array, trials: number): number {
  const rand = normals(0x9e3779b9);
  const scores = new Float64Array(E);
  const hit = new Uint8Array(E);
  const order = new Int32Array(E);
  let total = 0;
  for (let t = 0; t < trials; t++) {
    hit.fill(0);
    let distinct = 0;
    for (let b = 0; b < batch && distinct < E; b++) {
      for (let e = 0; e < E; e++) {
        scores[e] = rand() + bias[e]!;
        order[e] = e;
      }
      // top-k by partial selection: k passes over E (k and E are small)
      for (let j = 0; j < k; j++) {
        let best = j;
        for (let e = j + 1; e < E; e++) if (scores[order[e]!]! > scores[order[best]!]!) best = e;
        const chosen = order[best]!;
        order[best] = order[j]!;
        order[j] = chosen;
        if (!hit[chosen]) {
          hit[chosen] = 1;
          distinct++;
        }
      }
    }
    total += distinct;
  }
  return total / trials;
}

/** Seeded unit normals (Box-Muller over a 32-bit LCG): reproducible estimates. */
function normals(seed: number): () => number {
  let s = seed >>> 0;
  const uniform = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s + 0.5) / 2 ** 32;
  };
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const v = spare;
      spare = null;
      return v;
    }
    const r = Math.sqrt(-2 * Math.log(uniform()));
    const a = 2 * Math.PI * uniform();
    spare = r * Math.sin(a);
    return r * Math.cos(a);
  };
}
