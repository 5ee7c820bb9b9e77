/**
 * Turning one step's logits for a sequence into generated tokens: sample (or
 * verify proposed tokens), append, and check the stop conditions after every
 * token. Pure over the sequence's state.
 *
 * Verification of k proposed tokens (rows 0..k of the chunk's logits): token j
 * is accepted with probability p_target(draft_j) (1 or 0 under greedy, since a
 * prompt-lookup proposal is a point mass); on rejection the token is drawn from
 * the target distribution with the rejected token removed, which keeps the
 * output distribution exactly the sampler's. If all k are accepted, row k gives
 * a bonus token. Generation stops at the first token that ends the sequence.
 *
 * @example
 * const r = acceptStep(seq, chunk, logits, V, { eosTokenIds: [2], maxLen: 2048, topLogprobs: 0 });
 * r.tokens;   // appended to seq.tokens already
 * r.validKv;  // positions with valid KV: pass to scheduler.commit
 */
import { candidateProbs, sampleToken, scoreToken, type SampledToken } from "./sampler";
import type { ScheduledChunk } from "./scheduler";
import { numGenerated, type FinishReason, type Sequence } from "./sequence";

export interface AcceptOptions {
  eosTokenIds: readonly number[];
  /** Context limit: the sequence never grows past this many tokens. */
  maxLen: number;
  topLogprobs: number;
}

export interface AcceptResult {
  tokens: number[];
  logprobs: SampledToken[];
  finish: FinishReason | null;
  /** Positions whose KV is valid after this step. */
  validKv: number;
}

/** Token ids that may not be sampled now (stop tokens before min_tokens). */
export function bannedTokens(seq: Sequence, eosTokenIds: readonly number[], generated = numGenerated(seq)): number[] {
  if (generated >= seq.stop.minTokens) return [];
  return seq.stop.ignoreEos ? [...seq.stop.stopTokenIds] : [...eosTokenIds, ...seq.stop.stopTokenIds];
}

/** Why the sequence ends after its latest token, or null. */
export function stopReason(seq: Sequence, eosTokenIds: readonly number[], maxLen: number): FinishReason | null {
  const last = seq.tokens[seq.tokens.length - 1]!;
  const g = numGenerated(seq);
  if (seq.constraint?.complete) return "stop"; // the JSON object is whole
  if (seq.constraint?.failed) return "error"; // no token could continue it
  if (g >= seq.stop.minTokens) {
    if (seq.stop.stopTokenIds.includes(last)) return "stop";
    if (!seq.stop.ignoreEos && eosTokenIds.includes(last)) return "stop";
  }
  if (g >= seq.stop.maxTokens || seq.tokens.length >= maxLen) return "length";
  return null;
}

export function acceptStep(seq: Sequence, chunk: ScheduledChunk, logits: Float32Array, V: number, opts: AcceptOptions): AcceptResult {
  const tokens: number[] = [];
  const logprobs: SampledToken[] = [];
  const row = (j: number) => logits.subarray(j * V, (j + 1) * V);
  const append = (s: SampledToken): FinishReason | null => {
    seq.tokens.push(s.token);
    seq.counts.set(s.token, (seq.counts.get(s.token) ?? 0) + 1);
    seq.constraint?.accept(s.token);
    tokens.push(s.token);
    logprobs.push(s);
    return stopReason(seq, opts.eosTokenIds, opts.maxLen);
  };
  const ctx = () => ({ counts: seq.counts, banned: bannedTokens(seq, opts.eosTokenIds), allowed: seq.constraint?.allowed(), rng: seq.rng, topLogprobs: opts.topLogprobs });

  const k = chunk.numDraft;
  const draft = chunk.tokens.slice(chunk.tokens.length - k);
  let validKv = chunk.start + chunk.tokens.length - k;
  for (let j = 0; j < k; j++) {
    const c = ctx();
    const probs = candidateProbs(row(j), seq.sampling, c);
    const d = draft[j]!;
    const pd = probs.get(d) ?? 0;
    const accept = pd >= 1 || (pd > 0 && c.rng.next() < pd);
    if (accept) {
      const s = scoreToken(row(j), d, opts.topLogprobs);
      validKv++;
      const f = append(s);
      if (f) return { tokens, logprobs, finish: f, validKv };
      continue;
    }
    // Rejected: draw from the target distribution without the rejected token.
    const s = sampleToken(row(j), seq.sampling, { ...c, banned: [...c.banned, d] });
    return { tokens, logprobs, finish: append(s), validKv };
  }
  const s = sampleToken(row(k), seq.sampling, ctx());
  return { tokens, logprobs, finish: append(s), validKv };
}

/**
 * A step's tokens when they were sampled on the device (gpu-sampling.ts): ids[j] for logits row j of the chunk's
 * numDraft + 1, with its raw log-probability and the top alternatives the device reported (if asked). One row: its
 * token. A greedy verify step (k proposals): ids[j] is row j's argmax; proposal j is accepted while it equals row j's
 * id (a greedy target is a point mass); the first one that does not is replaced by that id (the argmax without the
 * rejected proposal is the argmax itself), and if all k are accepted row k's id is the bonus token: what acceptStep
 * does with the logits under greedy sampling. Appends the tokens and stops at the first that ends the sequence.
 */
export function acceptSampled(
  seq: Sequence,
  chunk: ScheduledChunk,
  ids: Int32Array,
  logprobs: Float32Array,
  opts: Omit<AcceptOptions, "topLogprobs">,
  tops?: SampledToken["top"][],
): AcceptResult {
  const k = chunk.numDraft;
  if (ids.length !== k + 1) throw new Error(`sequence ${seq.id}: a verify step of ${k} proposals needs ${k + 1} sampled rows, got ${ids.length}`);
  const draft = chunk.tokens.slice(chunk.tokens.length - k);
  const tokens: number[] = [];
  const lps: SampledToken[] = [];
  let validKv = chunk.start + chunk.tokens.length - k;
  const append = (j: number): FinishReason | null => {
    const token = ids[j]!;
    seq.tokens.push(token);
    seq.counts.set(token, (seq.counts.get(token) ?? 0) + 1);
    tokens.push(token);
    lps.push({ token, logprob: logprobs[j]!, top: tops?.[j] ?? [] });
    return stopReason(seq, opts.eosTokenIds, opts.maxLen);
  };
  for (let j = 0; j < k; j++) {
    const accepted = ids[j] === draft[j];
    if (accepted) validKv++;
    const f = append(j);
    if (f || !accepted) return { tokens, logprobs: lps, finish: f, validKv };
  }
  return { tokens, logprobs: lps, finish: append(k), validKv };
}

/** Whether some logit is above -Infinity (NaN never is); O(1) for ordinary rows, whose first value already is. */
export function hasSelectableLogit(row: Float32Array): boolean {
  for (let i = 0; i < row.length; i++) if (row[i]! > Number.NEGATIVE_INFINITY) return true;
  return false;
}
