/**
 * One engine step (model/runner.ts StepInput) -> the addon's packed step metadata, with the
 * checks the GPU cannot make (it would read out of bounds instead of failing):
 *
 *   meta = ids[T] | pos[T] | slot[T] | tokSeq[T] | rows[R] | tables[S * stride]
 *
 * tokSeq[t] is the block-table row of token t; rows are the tokens whose logits come back.
 * Sequences with no tokens take no table row and get an empty logits array.
 * Legend: T tokens, S sequences with tokens, R logit rows, B block size.
 *
 * @example
 *   const p = packStep(step, { blockSize: 16, numBlocks: 1024, stride, vocabSize, maxContext });
 *   const logits = await addon.step(model, p.meta, p.T, p.S, p.R);
 *   const perSeq = splitLogits(logits, p.logitCounts, vocabSize);
 */
import type { GpuSampling, SampledRows } from "../../model/cuda-runner";
import type { StepInput } from "../../model/runner";

export interface PackLimits {
  blockSize: number;
  numBlocks: number;
  /** Block-table stride the addon returned from allocateKv. */
  stride: number;
  vocabSize: number;
  maxContext: number;
}

export interface PackedStep {
  meta: Int32Array;
  T: number;
  S: number;
  R: number;
  /** numLogits of every input sequence, in order (0 for empty ones). */
  logitCounts: number[];
}

export function packStep(step: StepInput, lim: PackLimits): PackedStep {
  const B = lim.blockSize;
  let T = 0;
  let S = 0;
  let R = 0;
  for (const s of step.seqs) {
    const n = s.tokens.length;
    const end = s.startPos + n;
    if (s.numLogits < 0 || s.numLogits > n) throw new RangeError(`numLogits ${s.numLogits} outside [0, ${n}] for a chunk of ${n} tokens`);
    if (s.startPos < 0) throw new RangeError(`startPos ${s.startPos} is negative`);
    if (end > lim.maxContext) throw new RangeError(`position ${end - 1} is past the model's context of ${lim.maxContext}`);
    if (s.blockTable.length * B < end) throw new RangeError(`block table of ${s.blockTable.length} blocks cannot hold ${end} positions (block size ${B})`);
    if (n === 0) continue;
    if (Math.ceil(end / B) > lim.stride) throw new RangeError(`a sequence of ${end} positions needs more than the ${lim.stride} blocks a table holds`);
    T += n;
    S += 1;
    R += s.numLogits;
  }
  const meta = new Int32Array(4 * T + R + S * lim.stride);
  const ids = meta.subarray(0, T);
  const pos = meta.subarray(T, 2 * T);
  const slot = meta.subarray(2 * T, 3 * T);
  const tokSeq = meta.subarray(3 * T, 4 * T);
  const rows = meta.subarray(4 * T, 4 * T + R);
  const tables = meta.subarray(4 * T + R);
  let at = 0;
  let r = 0;
  let seq = 0;
  for (const s of step.seqs) {
    const n = s.tokens.length;
    if (n === 0) continue;
    const used = Math.ceil((s.startPos + n) / B);
    for (let b = 0; b < used; b++) {
      const id = s.blockTable[b]!;
      if (id < 0 || id >= lim.numBlocks) throw new RangeError(`block id ${id} outside the cache's ${lim.numBlocks} blocks`);
      tables[seq * lim.stride + b] = id;
    }
    for (let i = 0; i < n; i++) {
      const tok = s.tokens[i]!;
      if (tok < 0 || tok >= lim.vocabSize) throw new RangeError(`token id ${tok} outside the vocabulary [0, ${lim.vocabSize})`);
      const p = s.startPos + i;
      ids[at + i] = tok;
      pos[at + i] = p;
      slot[at + i] = s.blockTable[Math.floor(p / B)]! * B + (p % B);
      tokSeq[at + i] = seq;
    }
    for (let i = n - s.numLogits; i < n; i++) rows[r++] = at + i;
    at += n;
    seq += 1;
  }
  return { meta, T, S, R, logitCounts: step.seqs.map((s) => (s.tokens.length === 0 ? 0 : s.numLogits)) };
}

/** logits [R, V] -> one [numLogits, V] view per input sequence. */
export function splitLogits(logits: Float32Array, logitCounts: number[], V: number): Float32Array[] {
  let r = 0;
  return logitCounts.map((n) => {
    const out = logits.subarray(r * V, (r + n) * V);
    r += n;
    return out;
  });
}

/** Doubles per logit row in the addon's sampling block (native-cuda/src/sampling.h SampleParams):
 * temperature, top_k, top_p, seed, step, banned count, up to 8 banned ids, frequency penalty, presence penalty,
 * penalty pairs' offset and count, penalized input token (-1: none), top log-probabilities. */
export const SAMPLE_PARAMS_PER_ROW = 20;
const MAX_BANNED = 8;
/** Most top log-probabilities a row may ask for on the GPU (native-cuda kMaxTopLogprobs). */
export const MAX_DEVICE_TOP_LOGPROBS = 20;

/** Why the GPU sampler cannot take these parameters, or null: a NaN or a fraction would reach the kernel as garbage. */
export function badSampling(s: GpuSampling, V: number): string | null {
  if (!Number.isFinite(s.temperature)) return `temperature ${s.temperature} is not finite`;
  if (!Number.isInteger(s.topK) || s.topK < 0) return `top_k ${s.topK} is not a non-negative integer`;
  if (!(s.topP > 0 && s.topP <= 1)) return `top_p ${s.topP} is not in (0, 1]`;
  if (!Number.isSafeInteger(s.seed) || s.seed < 0) return `seed ${s.seed} is not an integer in [0, 2^53)`;
  if (!Number.isSafeInteger(s.step) || s.step < 0) return `step ${s.step} is not a non-negative integer`;
  for (const b of s.banned ?? []) if (!Number.isInteger(b) || b < 0 || b >= V) return `banned id ${b} is outside the vocabulary [0, ${V})`;
  for (const [name, v] of [["frequency penalty", s.frequencyPenalty ?? 0], ["presence penalty", s.presencePenalty ?? 0]] as const) {
    if (!Number.isFinite(v)) return `${name} ${v} is not finite`;
  }
  const top = s.topLogprobs ?? 0;
  if (!Number.isInteger(top) || top < 0 || top > MAX_DEVICE_TOP_LOGPROBS) return `top_logprobs ${top} is not an integer in [0, ${MAX_DEVICE_TOP_LOGPROBS}]`;
  const pen = s.penalties;
  if (pen) {
    if (pen.length % 2 !== 0) return "penalties are (token, count) pairs";
    for (let i = 0; i < pen.length; i += 2) {
      if (pen[i]! < 0 || pen[i]! >= V || pen[i + 1]! < 1) return `penalty pair (${pen[i]}, ${pen[i + 1]}): the token must be in [0, ${V}) and the count >= 1`;
    }
  }
  return null;
}

/** (token, count) pairs of a sequence's generated-token counts, for the device's penalties (GpuSampling.penalties). */
export function penaltyPairs(counts: ReadonlyMap<number, number>): Int32Array {
  const out = new Int32Array(counts.size * 2);
  let i = 0;
  for (const [t, c] of counts) {
    if (c <= 0) continue;
    out[i++] = t;
    out[i++] = c;
  }
  return i === out.length ? out : out.subarray(0, i);
}

/** Tokens each sequence of a step brings (packSampling's tokenCounts). */
export function tokenCounts(step: StepInput): number[] {
  return step.seqs.map((s) => s.tokens.length);
}

/** The packed sampling block and the penalty pairs its rows index. */
export interface PackedSampling {
  params: Float64Array;
  /** (token, count) pairs of every penalized row, concatenated. */
  penalties: Int32Array;
}

/** One sampling block row per logit row (a verify step's k + 1 rows of a sequence draw steps
 * step..step+k); refuses what the kernel would misread. tokenCounts (tokens per sequence) places a
 * penalizeInput row's token: the sequence's last token of the step. */
export function packSampling(sampling: GpuSampling[], logitCounts: number[], R: number, vocabSize: number, tokenCounts?: number[]): PackedSampling {
  if (sampling.length !== logitCounts.length) throw new RangeError(`${sampling.length} sampling entries for ${logitCounts.length} sequences`);
  const params = new Float64Array(R * SAMPLE_PARAMS_PER_ROW);
  const pairs: Int32Array[] = [];
  let nPairs = 0;
  let r = 0;
  let t = 0;
  logitCounts.forEach((n, i) => {
    const s = sampling[i]!;
    const banned = s.banned ?? [];
    if (banned.length > MAX_BANNED) throw new RangeError(`at most ${MAX_BANNED} banned ids per sequence on the GPU, got ${banned.length}`);
    const bad = badSampling(s, vocabSize);
    if (bad) throw new RangeError(`sampling of sequence ${i}: ${bad}`);
    const freq = s.frequencyPenalty ?? 0;
    const pres = s.presencePenalty ?? 0;
    const penalized = freq !== 0 || pres !== 0;
    const pen = penalized ? (s.penalties ?? new Int32Array(0)) : new Int32Array(0);
    let input = -1;
    if (penalized && s.penalizeInput) {
      if (!tokenCounts) throw new RangeError(`sequence ${i} penalizes its input token, but the step's token counts were not given`);
      if (n !== 1 || tokenCounts[i] !== 1) throw new RangeError(`sequence ${i} penalizes its input token: it must bring one token and one logits row`);
      input = t;
    }
    const offset = nPairs;
    if (pen.length > 0) pairs.push(pen), (nPairs += pen.length / 2);
    for (let j = 0; j < n; j++, r++) {
      const row = r * SAMPLE_PARAMS_PER_ROW;
      params.set([s.temperature, s.topK, s.topP, s.seed, s.step + j, banned.length, ...banned], row);
      params.set([freq, pres, offset, pen.length / 2, input, s.topLogprobs ?? 0], row + 6 + MAX_BANNED);
    }
    t += tokenCounts?.[i] ?? 0;
  });
  const penalties = new Int32Array(nPairs * 2);
  let at = 0;
  for (const p of pairs) penalties.set(p, at), (at += p.length);
  return { params, penalties };
}

const HOST_ROW_PARAMS: GpuSampling = { temperature: 0, topK: 0, topP: 1, seed: 0, step: 0 };

/**
 * packSampling for a step whose sequences may be host-sampled (GpuSampling.host): their rows get
 * greedy params the GPU sampler computes and nobody reads, and are listed in hostRows (ascending),
 * the rows whose logits come back.
 */
export function packDeviceSampling(sampling: GpuSampling[], logitCounts: number[], R: number, vocabSize: number, tokenCounts?: number[]): PackedSampling & { hostRows: Int32Array } {
  const rows: number[] = [];
  let r = 0;
  logitCounts.forEach((n, i) => {
    if (sampling[i]?.host) for (let j = 0; j < n; j++) rows.push(r + j);
    r += n;
  });
  const packed = packSampling(sampling.map((s) => (s?.host ? HOST_ROW_PARAMS : s)), logitCounts, R, vocabSize, tokenCounts);
  return { ...packed, hostRows: Int32Array.from(rows) };
}

/** The addon's sampled output split per sequence: ids and log-probabilities, and the logits of host-sampled sequences. */
export function splitSampled(
  out: { ids: Int32Array; logprobs: Float32Array; hostLogits?: Float32Array; topIds?: Int32Array; topLogprobs?: Float32Array },
  sampling: GpuSampling[],
  logitCounts: number[],
  vocabSize: number,
): SampledRows[] {
  let at = 0;
  let host = 0;
  return logitCounts.map((n, i) => {
    const rows: SampledRows = { ids: out.ids.subarray(at, at + n), logprobs: out.logprobs.subarray(at, at + n) };
    const k = sampling[i]?.host ? 0 : Math.min(sampling[i]?.topLogprobs ?? 0, vocabSize);
    if (k > 0) {
      if (!out.topIds || !out.topLogprobs || out.topIds.length < (at + n) * MAX_DEVICE_TOP_LOGPROBS) throw new Error("the step returned no top log-probabilities for a row that asked for them");
      rows.top = [];
      for (let j = 0; j < n; j++) {
        const base = (at + j) * MAX_DEVICE_TOP_LOGPROBS;
        rows.top.push(Array.from({ length: k }, (_, q) => ({ token: out.topIds![base + q]!, logprob: out.topLogprobs![base + q]! })));
      }
    }
    if (sampling[i]?.host) {
      if (!out.hostLogits || out.hostLogits.length < (host + n) * vocabSize) throw new Error("the step returned fewer host logits rows than it was asked for");
      rows.logits = out.hostLogits.subarray(host * vocabSize, (host + n) * vocabSize);
      host += n;
    }
    at += n;
    return rows;
  });
}

/**
 * Per-token chain of a step (the addon's `chain`): a sequence whose entry in `fromRow` is a row r >= 0 of the
 * previous sampled step brings exactly one token, and that token is read on the GPU from the id sampled for row r
 * (its value in the StepInput is a placeholder); -1 keeps the sequence's own tokens.
 */
export function chainTokens(step: StepInput, fromRow: Int32Array, T: number): Int32Array {
  if (fromRow.length !== step.seqs.length) throw new RangeError(`${fromRow.length} chain entries for ${step.seqs.length} sequences`);
  const chain = new Int32Array(T).fill(-1);
  let t = 0;
  step.seqs.forEach((s, i) => {
    const r = fromRow[i]!;
    if (r >= 0) {
      if (s.tokens.length !== 1) throw new RangeError(`sequence ${i} is chained to row ${r} but brings ${s.tokens.length} tokens (one is allowed)`);
      chain[t] = r;
    } else if (r !== -1) throw new RangeError(`chain entry ${r} for sequence ${i}: -1 or a row of the previous step`);
    t += s.tokens.length;
  });
  return chain;
}
