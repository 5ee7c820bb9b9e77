/**
 * The engine's choice between runner.forward + host sampling and runner.forwardSampled
 * (gpu-sampling.ts), over the real CPU runner and the bundled model (tiny-wordnet-moe):
 * testing/device-sampling-runner.ts gives that runner the CUDA runner's forwardSampled and
 * records which method each step called.
 */
import { expect, test } from "bun:test";
import type { ModelRunner } from "../model/runner";
import { createEngine, type Engine, type GenerateParams, type StepStats } from "./engine";
import { counterUniform, gpuSeed } from "./rng";
import { generateAll, useBundledModel } from "./testing/bundled-model";
import { withDeviceSampling, type DeviceSamplingRunner } from "./testing/device-sampling-runner";

const bundled = useBundledModel();

/** A fresh engine over the one loaded runner (allocateKv resets its cache); engines run one at a time. */
function engineOn(runner: ModelRunner, steps: StepStats[] = []): Engine {
  return createEngine({ runner, blockSize: 16, numKvBlocks: 64, maxNumSeqs: 8, maxBatchTokens: 64, maxQueue: 16, serverId: "t", onStep: (s) => steps.push(s) });
}

async function run(engine: Engine, reqs: GenerateParams[]): Promise<{ tokens: number[][]; logprobs: number[][]; tops: number }> {
  const outs = await generateAll(engine, reqs);
  return { tokens: outs.map((o) => o.tokens), logprobs: outs.map((o) => o.logprobs), tops: outs.reduce((n, o) => n + o.tops.reduce((k, t) => k + t.length, 0), 0) };
}

const greedy = (p: number[], n = 24): GenerateParams => ({ promptTokenIds: p, stop: { maxTokens: n, ignoreEos: true } });

test("greedy steps go to forwardSampled, and give the tokens and log-probabilities of forward + host sampling", async () => {
  const host = await run(engineOn(bundled.m.runner), bundled.prompts.map((p) => greedy(p)));
  const r = withDeviceSampling(bundled.m.runner);
  const steps: StepStats[] = [];
  const dev = await run(engineOn(r, steps), bundled.prompts.map((p) => greedy(p)));
  expect(dev.tokens).toEqual(host.tokens);
  expect(dev.tokens.every((t) => t.length === 24)).toBe(true);
  for (let i = 0; i < bundled.prompts.length; i++) for (let j = 0; j < 24; j++) expect(dev.logprobs[i]![j]!).toBeCloseTo(host.logprobs[i]![j]!, 4);
  // every step that sampled anything went to the device; the plain CPU runner never can
  expect(r.calls.filter((c) => c === "forward")).toEqual([]);
  expect(r.calls.length).toBe(steps.length);
  expect(steps.every((s) => s.deviceSampled)).toBe(true);
});

test("penalties or top_logprobs: those sequences are host-sampled from their own logits rows while the rest of the batch stays on the device", async () => {
  const penalized: GenerateParams = { ...greedy(bundled.prompts[1]!, 40), sampling: { frequencyPenalty: 0.5 } };
  const reqs = [penalized, greedy(bundled.prompts[0]!, 8)];
  const ref = await run(engineOn(bundled.m.runner), reqs); // no forwardSampled: every row on the host
  const r = withDeviceSampling(bundled.m.runner);
  const steps: StepStats[] = [];
  const out = await run(engineOn(r, steps), reqs);
  expect(out.tokens).toEqual(ref.tokens);
  expect(out.tokens.map((t) => t.length)).toEqual([40, 8]);
  // together: device-sampled steps with the penalized row marked host; the penalized one alone: forward
  const mixedSteps = r.sampled.filter((s) => s.some((x) => x.host) && s.some((x) => !x.host));
  expect(mixedSteps.length).toBeGreaterThanOrEqual(7);
  expect(r.calls).toContain("forward");
  expect(steps.filter((s) => s.deviceSampled).length).toBe(r.calls.filter((c) => c === "forwardSampled").length);

  // top_logprobs beside a greedy request: its tops come from its own logits rows
  const withTops = [{ ...greedy(bundled.prompts[2]!, 6), topLogprobs: 3 }, greedy(bundled.prompts[3]!, 6)];
  const ref2 = await run(engineOn(bundled.m.runner), withTops);
  const r2 = withDeviceSampling(bundled.m.runner);
  const out2 = await run(engineOn(r2), withTops);
  expect(out2.tops).toBe(6 * 3);
  expect(out2.tokens).toEqual(ref2.tokens);
  expect(r2.sampled.some((s) => s.some((x) => x.host))).toBe(true);
  // alone, nothing is left for the device: forward
  const r3 = withDeviceSampling(bundled.m.runner);
  await run(engineOn(r3), [{ ...greedy(bundled.prompts[2]!, 6), topLogprobs: 3 }]);
  expect(r3.calls.every((c) => c === "forward")).toBe(true);

  // once the penalized sequence is gone, the steps carry no host rows
  const r4 = withDeviceSampling(bundled.m.runner);
  await run(engineOn(r4), [{ ...greedy(bundled.prompts[1]!, 4), sampling: { presencePenalty: 1 } }, greedy(bundled.prompts[0]!, 30)]);
  expect(r4.sampled.slice(-20).every((s) => s.every((x) => !x.host))).toBe(true);
  expect(r4.calls.slice(-20).every((c) => c === "forwardSampled")).toBe(true);
});

test("logit_bias: a biased sequence is host-sampled beside device-sampled ones, and the bias decides its tokens", async () => {
  const bias = new Map([[17, 100]]);
  const biased: GenerateParams = { ...greedy(bundled.prompts[1]!, 12), sampling: { logitBias: bias } };
  const reqs = [biased, greedy(bundled.prompts[0]!, 12)];
  const ref = await run(engineOn(bundled.m.runner), reqs);
  const r = withDeviceSampling(bundled.m.runner);
  const out = await run(engineOn(r), reqs);
  expect(out.tokens).toEqual(ref.tokens);
  expect(out.tokens[0]).toEqual(Array(12).fill(17));
  expect(out.tokens[1]).not.toEqual(Array(12).fill(17));
  expect(r.sampled.some((s) => s.some((x) => x.host) && s.some((x) => !x.host))).toBe(true);
});

test("seeded sampling: the device path draws per (seed, token index), whatever the batch and whichever side samples", async () => {
  const seeded = (seed: bigint): GenerateParams => ({ promptTokenIds: bundled.prompts[3]!, sampling: { temperature: 1.2, seed }, stop: { maxTokens: 32, ignoreEos: true } });
  const r = withDeviceSampling(bundled.m.runner);
  const alone = await run(engineOn(r), [seeded(11n)]);
  expect(r.calls.every((c) => c === "forwardSampled")).toBe(true);
  // the rows carry the folded seed and the index of the token they draw
  expect(r.sampled.map((s) => s[0]!.step)).toEqual(Array.from({ length: 32 }, (_, i) => i));
  expect(r.sampled.every((s) => s[0]!.seed === gpuSeed(11n) && s[0]!.temperature === 1.2 && s[0]!.topP === 1)).toBe(true);
  const again = await run(engineOn(withDeviceSampling(bundled.m.runner)), [greedy(bundled.prompts[0]!), seeded(11n), greedy(bundled.prompts[1]!)]);
  expect(again.tokens[1]).toEqual(alone.tokens[0]!);
  const other = await run(engineOn(withDeviceSampling(bundled.m.runner)), [seeded(12n)]);
  expect(other.tokens[0]).not.toEqual(alone.tokens[0]!);
  // asking for top_logprobs beside a greedy request, the seeded one is host-sampled inside device
  // steps, from the same draws
  const r2 = withDeviceSampling(bundled.m.runner);
  const mixed = await run(engineOn(r2), [greedy(bundled.prompts[0]!, 40), { ...seeded(11n), topLogprobs: 1 }]);
  expect(r2.sampled.filter((s) => s.length === 2 && s[1]!.host && !s[0]!.host).length).toBeGreaterThanOrEqual(30);
  expect(mixed.tokens[1]).toEqual(alone.tokens[0]!);
  // and with every row on the host (forward), the same again
  const r3 = withDeviceSampling(bundled.m.runner);
  const hostOnly = await run(engineOn(r3), [{ ...greedy(bundled.prompts[0]!, 40), sampling: { frequencyPenalty: 1 } }, { ...seeded(11n), topLogprobs: 1 }]);
  expect(r3.calls.every((c) => c === "forward")).toBe(true);
  expect(hostOnly.tokens[1]).toEqual(alone.tokens[0]!);
  // temperature sampling really happened: not the greedy continuation
  const g = await run(engineOn(bundled.m.runner), [greedy(bundled.prompts[3]!, 32)]);
  expect(alone.tokens[0]).not.toEqual(g.tokens[0]!);
});

test("min_tokens bans EOS on the device path; top-k 1 is greedy there", async () => {
  const eos = bundled.m.runner.spec.eosTokenIds;
  const r = withDeviceSampling(bundled.m.runner);
  const out = await run(engineOn(r), [{ promptTokenIds: bundled.prompts[0]!, stop: { maxTokens: 64, minTokens: 20 } }]);
  expect(r.calls.every((c) => c === "forwardSampled")).toBe(true);
  // EOS is banned for the rows that draw tokens 0..19, allowed from token 20 on
  for (const [s] of r.sampled) expect(s!.banned).toEqual(s!.step < 20 ? eos : []);
  expect(out.tokens[0]!.slice(0, 20).some((t) => eos.includes(t))).toBe(false);
  expect(out.tokens[0]!.length).toBeGreaterThanOrEqual(20);
  const k1 = await run(engineOn(withDeviceSampling(bundled.m.runner)), [{ promptTokenIds: bundled.prompts[2]!, sampling: { temperature: 0.9, topK: 1, seed: 5n }, stop: { maxTokens: 16, ignoreEos: true } }]);
  const g = await run(engineOn(bundled.m.runner), [greedy(bundled.prompts[2]!, 16)]);
  expect(k1.tokens).toEqual(g.tokens);
});

test("counterUniform is the device's hash: fixed per (seed, step), in [0, 1)", () => {
  expect(counterUniform(7, 3)).toBe(counterUniform(7, 3));
  expect(counterUniform(7, 3)).not.toBe(counterUniform(7, 4));
  const xs = Array.from({ length: 2000 }, (_, i) => counterUniform(123, i));
  expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  expect(Math.abs(mean - 0.5)).toBeLessThan(0.03);
  expect(gpuSeed(2n ** 64n - 1n)).toBeLessThan(2 ** 53);
  expect(Number.isSafeInteger(gpuSeed(2n ** 63n + 12345n))).toBe(true);
});
