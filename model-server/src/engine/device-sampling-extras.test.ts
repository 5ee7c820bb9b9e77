/**
 * Penalties and top log-probabilities sampled on the device (a runner with `samplingExtras`, as the CUDA runner where
 * its cluster sampler runs), over the real CPU runner and the bundled model: testing/device-sampling-runner.ts does
 * what native-cuda's sampler does (the pairs the engine sends, the chained input token counted once more). The
 * engine must give the tokens, log-probabilities and top alternatives of forward + host sampling, with every step on
 * forwardSampled, the decode steps overlapped (chained) as for any other device-sampled sequence.
 */
import { expect, test } from "bun:test";
import type { ModelRunner } from "../model/runner";
import { createEngine, type Engine, type GenerateParams, type StepStats } from "./engine";
import { generateAll, useBundledModel } from "./testing/bundled-model";
import { withDeviceSampling } from "./testing/device-sampling-runner";

const bundled = useBundledModel();

function engineOn(runner: ModelRunner, steps: StepStats[] = []): Engine {
  return createEngine({ runner, blockSize: 16, numKvBlocks: 64, maxNumSeqs: 8, maxBatchTokens: 64, maxQueue: 16, serverId: "t", onStep: (s) => steps.push(s) });
}

const run = generateAll;

const req = (p: number[], n: number, extra: Partial<GenerateParams> = {}): GenerateParams => ({ promptTokenIds: p, stop: { maxTokens: n, ignoreEos: true }, ...extra });

test("penalized and top_logprobs sequences stay on the device, overlapped, with the host sampler's tokens", async () => {
  const reqs = [
    req(bundled.prompts[0]!, 40, { sampling: { frequencyPenalty: 1.5 } }),
    req(bundled.prompts[1]!, 40, { sampling: { presencePenalty: 2 }, topLogprobs: 4 }),
    req(bundled.prompts[2]!, 40, { sampling: { frequencyPenalty: -0.5, presencePenalty: 0.75 } }),
    req(bundled.prompts[3]!, 40, { topLogprobs: 20 }),
  ];
  const host = await run(engineOn(bundled.m.runner), reqs); // no forwardSampled: every row sampled on the host
  const r = withDeviceSampling(bundled.m.runner, { extras: true, chains: true });
  const steps: StepStats[] = [];
  const dev = await run(engineOn(r, steps), reqs);
  dev.forEach((d, i) => {
    expect(d.tokens).toEqual(host[i]!.tokens);
    expect(d.tokens.length).toBe(40);
    d.logprobs.forEach((lp, j) => expect(lp).toBeCloseTo(host[i]!.logprobs[j]!, 4));
    d.tops.forEach((t, j) => {
      expect(t.map((x) => x.token)).toEqual(host[i]!.tops[j]!.map((x) => x.token));
      t.forEach((x, q) => expect(x.logprob).toBeCloseTo(host[i]!.tops[j]![q]!.logprob, 4));
    });
  });
  expect(dev[1]!.tops.every((t) => t.length === 4)).toBe(true);
  expect(dev[3]!.tops.every((t) => t.length === 20)).toBe(true);
  // every step on the device, none of its rows host-sampled; decode steps chained, their penalized rows counting
  // the chained token on the device
  expect(r.calls.every((c) => c === "forwardSampled")).toBe(true);
  expect(r.sampled.every((s) => s.every((x) => !x.host))).toBe(true);
  expect(steps.filter((s) => s.lookahead).length).toBeGreaterThan(20);
  const chainedPenalized = r.sampled.flat().filter((x) => x.penalizeInput);
  expect(chainedPenalized.length).toBeGreaterThan(40);
  expect(chainedPenalized.every((x) => (x.frequencyPenalty ?? 0) !== 0 || (x.presencePenalty ?? 0) !== 0)).toBe(true);
  // the penalties changed the continuations (the test would pass vacuously otherwise)
  const plain = await run(engineOn(bundled.m.runner), [req(bundled.prompts[0]!, 40), req(bundled.prompts[1]!, 40)]);
  expect(dev[0]!.tokens).not.toEqual(plain[0]!.tokens);
  expect(dev[1]!.tokens).not.toEqual(plain[1]!.tokens);
});

// (no top-p: the host walks a truncated nucleus most likely first, the device in id order, so only untruncated draws
// agree token for token)
test("seeded temperature sampling with penalties: the same tokens on the device (chained) as on the host", async () => {
  const seeded: GenerateParams = req(bundled.prompts[3]!, 48, { sampling: { temperature: 0.9, seed: 21n, frequencyPenalty: 0.8 } });
  // the host path with the device's draws: a sampled runner that keeps this sequence on the host (no extras)
  const hostSide = withDeviceSampling(bundled.m.runner);
  const host = await run(engineOn(hostSide), [seeded]);
  expect(hostSide.calls.every((c) => c === "forward")).toBe(true);
  const r = withDeviceSampling(bundled.m.runner, { extras: true, chains: true });
  const dev = await run(engineOn(r), [seeded]);
  expect(r.calls.every((c) => c === "forwardSampled")).toBe(true);
  expect(dev[0]!.tokens).toEqual(host[0]!.tokens);
});

test("without extras the runner keeps penalties and top_logprobs on the host (no row reaches it with them)", async () => {
  const r = withDeviceSampling(bundled.m.runner, { chains: true });
  await run(engineOn(r), [req(bundled.prompts[0]!, 12, { sampling: { presencePenalty: 1 } }), req(bundled.prompts[1]!, 12, { topLogprobs: 2 }), req(bundled.prompts[2]!, 12)]);
  for (const s of r.sampled) for (const x of s) if (!x.host) expect(x.penalties === undefined && (x.topLogprobs ?? 0) === 0).toBe(true);
  expect(r.sampled.some((s) => s.some((x) => x.host))).toBe(true);
});
