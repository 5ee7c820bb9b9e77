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

test("rows that need the host: penalties, top_logprobs, more than 8 banned ids, verify steps", () => {
  expect(deviceSamplingFor(chunk({ frequencyPenalty: 0.1 }), none)).toBeNull();
  expect(deviceSamplingFor(chunk({ presencePenalty: -1 }), none)).toBeNull();
  expect(deviceSamplingFor(chunk(), { topLogprobs: 1, banned: [] })).toBeNull();
  expect(deviceSamplingFor(chunk(), { topLogprobs: 0, banned: [1, 2, 3, 4, 5, 6, 7, 8] })).not.toBeNull();
  expect(deviceSamplingFor(chunk(), { topLogprobs: 0, banned: [1, 2, 3, 4, 5, 6, 7, 8, 9] })).toBeNull();
  expect(deviceSamplingFor(chunk({}, { tokens: [8, 9, 10], numLogits: 3, numDraft: 2 }), none)).toBeNull();
  expect(deviceSamplingFor(chunk({ topK: 1.5 }), none)).toBeNull();
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
