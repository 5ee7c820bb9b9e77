import { expect, test } from "bun:test";
import { deviceSamplingFor, HOST_SAMPLED, planDeviceSampling } from "./gpu-sampling";
import type { ScheduledChunk } from "./scheduler";
import { createSequence, type SamplingOptions } from "./sequence";

const chunk = (sampling: Partial<SamplingOptions> = {}, o: Partial<ScheduledChunk> = {}): ScheduledChunk => {
  const seq = createSequence({ id: 1, prompt: [1, 2, 3], sampling });
  seq.tokens.push(7, 8); // two generated: the next draw is token index 2
  return { seq, start: 4, tokens: [8], numLogits: 1, numDraft: 0, ...o };
};
const none = { topLogprobs: 0, banned: [] as number[] };

test("a plain row maps to the device sampler: its seed, the index of its next token, top_p 1 for no limit", () => {
  const c = chunk({ temperature: 0.7, topK: 40, topP: 0, seed: 5n });
  expect(deviceSamplingFor(c, { topLogprobs: 0, banned: [9] })).toEqual({ temperature: 0.7, topK: 40, topP: 1, seed: c.seq.gpuSeed, step: 2, banned: [9] });
  expect(deviceSamplingFor(chunk({ topP: 0.9 }), none)!.topP).toBe(0.9);
});

test("rows that need the host: penalties and top_logprobs without extras, more than 8 banned ids, sampled verify steps", () => {
  expect(deviceSamplingFor(chunk({ frequencyPenalty: 0.1 }), none)).toBeNull();
  expect(deviceSamplingFor(chunk({ presencePenalty: -1 }), none)).toBeNull();
  expect(deviceSamplingFor(chunk(), { topLogprobs: 1, banned: [] })).toBeNull();
  expect(deviceSamplingFor(chunk(), { topLogprobs: 0, banned: [1, 2, 3, 4, 5, 6, 7, 8] })).not.toBeNull();
  expect(deviceSamplingFor(chunk(), { topLogprobs: 0, banned: [1, 2, 3, 4, 5, 6, 7, 8, 9] })).toBeNull();
  expect(deviceSamplingFor(chunk({ temperature: 0.5 }, { tokens: [8, 9, 10], numLogits: 3, numDraft: 2 }), none)).toBeNull();
  expect(deviceSamplingFor(chunk({ topK: 1.5 }), none)).toBeNull();
});

test("with extras: penalties carry the host's counts, top_logprobs up to 20", () => {
  const c = chunk({ frequencyPenalty: 0.5, presencePenalty: -0.25 });
  c.seq.counts.set(7, 1).set(8, 2);
  const g = deviceSamplingFor(c, none, true)!;
  expect(g).toMatchObject({ frequencyPenalty: 0.5, presencePenalty: -0.25 });
  expect(Array.from(g.penalties!)).toEqual([7, 1, 8, 2]);
  expect(g.penalizeInput).toBeUndefined(); // an ordinary step: the host has counted its input token
  expect(deviceSamplingFor(chunk(), { topLogprobs: 20, banned: [] }, true)!.topLogprobs).toBe(20);
  expect(deviceSamplingFor(chunk(), { topLogprobs: 21, banned: [] }, true)).toBeNull();
  expect(deviceSamplingFor(chunk(), none, true)!.penalties).toBeUndefined();
});

test("greedy verify steps go to the device unless penalized or their proposals cross min_tokens", () => {
  const verify = (sampling: Partial<SamplingOptions> = {}) => chunk(sampling, { tokens: [8, 9, 10], numLogits: 3, numDraft: 2 });
  expect(deviceSamplingFor(verify(), none)).toMatchObject({ temperature: 0, step: 2 });
  expect(deviceSamplingFor(verify({ frequencyPenalty: 1 }), none, true)).toBeNull();
  // two generated tokens: min_tokens 3 is crossed by the proposals (rows 0..2 draw tokens 2..4), min_tokens 6 is not
  const minTokens = (n: number) => {
    const c = verify();
    c.seq.stop.minTokens = n;
    return c;
  };
  expect(deviceSamplingFor(minTokens(3), { topLogprobs: 0, banned: [63] })).toBeNull();
  expect(deviceSamplingFor(minTokens(6), { topLogprobs: 0, banned: [63] })).not.toBeNull();
  expect(deviceSamplingFor(minTokens(2), none)).not.toBeNull(); // reached: nothing banned on any row
  expect(deviceSamplingFor(minTokens(3), none)).not.toBeNull(); // nothing to ban (ignore_eos, no stop ids)
});

test("a step goes to the device when some row that wants a token can; rows that cannot are host-sampled inside it", () => {
  const prefill = chunk({ frequencyPenalty: 1 }, { numLogits: 0 });
  expect(planDeviceSampling([prefill], () => none)).toBeNull();
  expect(planDeviceSampling([prefill, chunk()], () => none)).toHaveLength(2);
  const mixed = planDeviceSampling([chunk(), chunk({ frequencyPenalty: 1 })], () => none)!;
  expect(mixed[0]!.host).toBeUndefined();
  expect(mixed[1]).toEqual(HOST_SAMPLED);
  // no row that wants a token can go to the device: the whole step takes forward()
  expect(planDeviceSampling([chunk({ frequencyPenalty: 1 }), chunk({ presencePenalty: 0.5 })], () => none)).toBeNull();
  expect(planDeviceSampling([prefill, chunk({ frequencyPenalty: 1 })], () => none)).toBeNull();
});
