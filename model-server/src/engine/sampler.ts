/**
 * Token sampling from one row of logits: penalties, then greedy or
 * temperature / top-k / top-p sampling with the sequence's own PRNG. Pure: the
 * same logits, parameters, counts and PRNG state give the same token.
 *
 * Order (as vLLM and OpenAI): the request's logit bias added to the raw logits,
 * frequency and presence penalties (over tokens generated so far), tokens that
 * may not end the sequence yet (before `min_tokens`) masked, then temperature,
 * top-k, top-p, draw.
 * Log-probabilities reported are those of the raw model distribution.
 *
 * @example
 * const pick = sampleToken(logits, { temperature: 0.8, topP: 0.95, topK: 0, frequencyPenalty: 0, presencePenalty: 0 },
 *   { counts: new Map(), banned: [], rng: createRng(7n), topLogprobs: 0 });
 * pick.token; // an id in [0, V)
 */
import type { Rng } from "./rng";
import type { SamplingOptions } from "./sequence";

export interface SampleContext {
  /** Generated-token counts (penalties). */
  counts: ReadonlyMap<number, number>;
  /** Token ids that may not be chosen now (EOS and stop ids before min_tokens). */
  banned: readonly number[];
  /** When set, only ids marked 1 may be chosen (a constraint's mask, json-constraint.ts). */
  allowed?: Uint8Array;
  rng: Rng;
  /** How many top alternatives to report (0: none). */
  topLogprobs: number;
}

export interface SampledToken {
  token: number;
  /** Raw model log-probability of `token`. */
  logprob: number;
  top: { token: number; logprob: number }[];
}

/** A copy of the logits with the logit bias and frequency/presence penalties applied and banned tokens masked to -Infinity. */
function penalizedLogits(logits: Float32Array, p: SamplingOptions, ctx: Pick<SampleContext, "counts" | "banned" | "allowed">): Float32Array {
  const V = logits.length;
  const x = new Float32Array(logits);
  if (p.logitBias) for (const [t, b] of p.logitBias) if (t < V) x[t] = x[t]! + b;
  if (p.frequencyPenalty !== 0 || p.presencePenalty !== 0) {
    for (const [t, c] of ctx.counts) {
      if (t < V && c > 0) x[t] = x[t]! - p.frequencyPenalty * c - p.presencePenalty;
    }
  }
  for (const t of ctx.banned) if (t < V) x[t] = Number.NEGATIVE_INFINITY;
  const a = ctx.allowed;
  if (a) for (let t = 0; t < V; t++) if (a[t] === 0) x[t] = Number.NEGATIVE_INFINITY;
  return x;
}

/** The token the sampler would pick; also used to verify a proposed token. */
export function sampleToken(logits: Float32Array, p: SamplingOptions, ctx: SampleContext): SampledToken {
  const x = penalizedLogits(logits, p, ctx);

  let token: number;
  if (p.temperature <= 0) token = argmax(x);
  else token = draw(x, p, ctx.rng);
  return scoreToken(logits, token, ctx.topLogprobs);
}

/**
 * The sampler's full distribution over candidates (after penalties, masks,
 * temperature, top-k and top-p): used to accept or reject proposed tokens.
 * Greedy gives a point mass on the argmax.
 */
export function candidateProbs(logits: Float32Array, p: SamplingOptions, ctx: Omit<SampleContext, "rng" | "topLogprobs">): Map<number, number> {
  const x = penalizedLogits(logits, p, ctx);
  if (p.temperature <= 0) return new Map([[argmax(x), 1]]);
  const { ids, probs } = nucleus(x, p);
  const out = new Map<number, number>();
  for (let i = 0; i < ids.length; i++) out.set(ids[i]!, probs[i]!);
  return out;
}

function argmax(x: Float32Array): number {
  let best = 0;
  let bv = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < x.length; i++) {
    if (x[i]! > bv) {
      bv = x[i]!;
      best = i;
    }
  }
  return best;
}

/** Candidates after temperature, top-k and top-p, with renormalized probabilities, most likely first. */
function nucleus(x: Float32Array, p: SamplingOptions): { ids: number[]; probs: number[] } {
  const V = x.length;
  const invT = 1 / p.temperature;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < V; i++) if (x[i]! > max) max = x[i]!;
  const w = new Float64Array(V);
  for (let i = 0; i < V; i++) w[i] = Math.exp((x[i]! - max) * invT);
  let ids: number[] = [];
  for (let i = 0; i < V; i++) if (w[i]! > 0) ids.push(i);
  const truncates = (p.topK > 0 && p.topK < ids.length) || (p.topP > 0 && p.topP < 1);
  // Untruncated sampling needs no order: skip the sort (the common case).
  if (truncates) ids.sort((a, b) => w[b]! - w[a]! || a - b);
  if (p.topK > 0 && ids.length > p.topK) ids = ids.slice(0, p.topK);
  let kept = 0;
  for (const i of ids) kept += w[i]!;
  if (p.topP > 0 && p.topP < 1) {
    let acc = 0;
    let n = 0;
    while (n < ids.length) {
      acc += w[ids[n]!]! / kept;
      n++;
      if (acc >= p.topP) break;
    }
    ids = ids.slice(0, n);
    kept = 0;
    for (const i of ids) kept += w[i]!;
  }
  return { ids, probs: ids.map((i) => w[i]! / kept) };
}

function draw(x: Float32Array, p: SamplingOptions, rng: Rng): number {
  const { ids, probs } = nucleus(x, p);
  if (ids.length === 0) return argmax(x);
  const u = rng.next();
  let acc = 0;
  for (let i = 0; i < ids.length; i++) {
    acc += probs[i]!;
    if (u < acc) return ids[i]!;
  }
  return ids[ids.length - 1]!;
}

/** `token` with its raw log-probability and the `topN` best alternatives. */
export function scoreToken(logits: Float32Array, token: number, topN: number): SampledToken {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
  const lse = max + Math.log(sum);
  const top: { token: number; logprob: number }[] = [];
  if (topN > 0) {
    // Partial selection: keep the best topN in a small sorted list.
    for (let i = 0; i < logits.length; i++) {
      const v = logits[i]!;
      if (top.length < topN || v > top[top.length - 1]!.logprob) {
        let j = top.length;
        while (j > 0 && top[j - 1]!.logprob < v) j--;
        top.splice(j, 0, { token: i, logprob: v });
        if (top.length > topN) top.pop();
      }
    }
    for (const t of top) t.logprob -= lse;
  }
  return { token, logprob: logits[token]! - lse, top };
}
