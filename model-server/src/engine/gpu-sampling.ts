/**
 * Which steps the engine samples on the device. A runner that offers `forwardSampled` (the CUDA
 * runner) returns one sampled id and its raw log-probability per logits row instead of R x V
 * fp32 logits: on an H200 at Qwen3-30B-A3B shape and batch 64 that is 33 ms per decode step
 * against 59 ms with the logits copied to the host and sampled here. The device sampler knows
 * greedy, temperature, top-k, top-p, a seed and up to 8 banned ids (EOS and stop ids before
 * min_tokens); where the runner says `samplingExtras` it also takes frequency and presence penalties
 * (the host's counts of generated tokens go with the step) and top log-probabilities (up to 20).
 * Penalties and top log-probabilities on a runner without extras need the whole distribution. A verify
 * step of greedy proposals (speculative decoding) needs only each row's argmax: the device samples its
 * k + 1 rows and acceptance compares ids (accept.ts acceptSampled); a sampled or penalized verify step
 * needs the whole distribution. Such a sequence is marked host-sampled: in a step where others
 * are sampled on the device, only its logits rows come back (SampledRows.logits) and the host
 * sampler takes them; a step with no device-sampled row takes forward() and the host sampler.
 *
 * A row's draw on the device is a counter-based hash of (seed, n) for its n-th output token
 * (rng.ts `counterUniform`); on such runners the engine gives the host sampler the same draw,
 * so a seeded sequence's u for a token does not depend on which side sampled it.
 *
 * @example
 * const fs = sampledForward(runner);
 * const plan = fs && planDeviceSampling(chunks, (c) => ({ topLogprobs: 0, banned: [] }), samplingExtras(runner));
 * if (fs && plan) rows = await fs(step, plan);
 */
import { MAX_DEVICE_TOP_LOGPROBS, penaltyPairs } from "../backend/cuda/pack-step";
import type { GpuSampling, SampledRows } from "../model/cuda-runner";
import type { ModelRunner, StepInput } from "../model/runner";
import type { ScheduledChunk } from "./scheduler";
import { numGenerated } from "./sequence";

export type { GpuSampling, SampledRows };
export { MAX_DEVICE_TOP_LOGPROBS, penaltyPairs };

/** Ids the device sampler can ban per row (native-cuda/src/sampling.h kMaxBanned). */
export const MAX_DEVICE_BANNED = 8;

/** chain: see CudaModelRunner.forwardSampled (only on runners with `chainsSampled`). */
export type SampledForward = (step: StepInput, sampling: GpuSampling[], chain?: Int32Array) => Promise<SampledRows[]>;

/** The runner's forwardSampled, bound, or null when it has none (the CPU runner). */
export function sampledForward(runner: ModelRunner): SampledForward | null {
  const f = (runner as ModelRunner & { forwardSampled?: SampledForward }).forwardSampled;
  return typeof f === "function" ? f.bind(runner) : null;
}

/** Whether the runner's device sampler takes penalties and top log-probabilities (CudaModelRunner.samplingExtras). */
export function samplingExtras(runner: ModelRunner): boolean {
  return (runner as ModelRunner & { samplingExtras?: boolean }).samplingExtras === true;
}

/** What the engine knows of a row beyond its sequence: top-logprobs asked for, ids banned now. */
export interface RowNeeds {
  topLogprobs: number;
  banned: readonly number[];
}

/**
 * The device sampling of one chunk, or null when its sampling needs the host (proposed tokens to
 * verify, more banned ids than the device takes, a logit bias; penalties and top-logprobs unless `extras`).
 */
export function deviceSamplingFor(c: ScheduledChunk, needs: RowNeeds, extras = false): GpuSampling | null {
  const s = c.seq.sampling;
  if (c.numLogits === 0) return { temperature: 0, topK: 0, topP: 1, seed: 0, step: 0 }; // no row to sample
  const penalized = s.frequencyPenalty !== 0 || s.presencePenalty !== 0;
  if (c.numLogits !== 1 + c.numDraft) return null;
  if (s.logitBias && s.logitBias.size > 0) return null; // the device samplers take no bias: the host row
  if (c.seq.constraint) return null; // nor a constraint's mask
  // a verify step (k proposed tokens, k + 1 rows): greedy only, where each row's argmax is what acceptance needs
  // (accept.ts acceptSampled); the same bans on every row (no min_tokens boundary inside the proposals) and no
  // penalties (the accepted proposals would change the later rows' counts)
  if (c.numDraft > 0 && (s.temperature > 0 || penalized || !sameBans(c, needs))) return null;
  if (!extras && (penalized || needs.topLogprobs > 0)) return null;
  if (needs.topLogprobs > MAX_DEVICE_TOP_LOGPROBS || needs.banned.length > MAX_DEVICE_BANNED) return null;
  // what the device cannot represent stays on the host (the runner would refuse the whole step)
  if (!Number.isFinite(s.temperature) || !Number.isInteger(s.topK) || s.topK < 0) return null;
  if (!Number.isFinite(s.frequencyPenalty) || !Number.isFinite(s.presencePenalty)) return null;
  const g: GpuSampling = {
    temperature: s.temperature,
    topK: s.topK,
    topP: s.topP > 0 && s.topP < 1 ? s.topP : 1,
    seed: c.seq.gpuSeed,
    step: numGenerated(c.seq),
    banned: [...needs.banned],
  };
  if (penalized) Object.assign(g, { frequencyPenalty: s.frequencyPenalty, presencePenalty: s.presencePenalty, penalties: penaltyPairs(c.seq.counts) });
  if (needs.topLogprobs > 0) g.topLogprobs = needs.topLogprobs;
  return g;
}

/** Whether the ids banned at the chunk's first row are banned at every row of its proposals too (min_tokens). */
function sameBans(c: ScheduledChunk, needs: RowNeeds): boolean {
  const generated = numGenerated(c.seq);
  const minTokens = c.seq.stop.minTokens;
  // nothing banned now while below min_tokens means nothing is ever banned (ignore_eos and no stop ids)
  return needs.banned.length === 0 || generated >= minTokens || generated + c.numDraft < minTokens;
}

/** A chunk sampled on the host inside a device-sampled step: only its logits rows come back. */
export const HOST_SAMPLED: GpuSampling = { host: true, temperature: 0, topK: 0, topP: 1, seed: 0, step: 0 };

/**
 * The sampling of every chunk of a step: on the device where it can be, else HOST_SAMPLED (its
 * logits rows alone come back and the host sampler takes them). Null (the whole step through
 * forward()) when no chunk wants a token (non-final prefill chunks download no logits either
 * way) or no chunk that wants one can be sampled on the device.
 */
export function planDeviceSampling(chunks: readonly ScheduledChunk[], needs: (c: ScheduledChunk) => RowNeeds, extras = false): GpuSampling[] | null {
  let onDevice = 0;
  const out = chunks.map((c) => {
    const g = deviceSamplingFor(c, needs(c), extras);
    if (g && c.numLogits > 0) onDevice++;
    return g ?? HOST_SAMPLED;
  });
  return onDevice > 0 ? out : null;
}
