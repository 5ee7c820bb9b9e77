/**
 * Speculative verify steps sampled on the device (gpu-sampling.ts, accept.ts acceptSampled): a greedy verify step's
 * k + 1 rows come back as ids (each row's argmax) instead of logits, and acceptance compares ids. Over the toy runner
 * (repeating context: prompt lookup proposes the right tokens) and the bundled model (natural text: proposals often
 * rejected), wrapped by testing/device-sampling-runner.ts, against the same engine sampling on the host.
 */
import { expect, test } from "bun:test";
import type { ModelRunner } from "../model/runner";
import { createEngine, type Engine, type GenerateParams, type StepStats } from "./engine";
import { generateAll, useBundledModel } from "./testing/bundled-model";
import { withDeviceSampling } from "./testing/device-sampling-runner";
import { createToyRunner, toyContinuation } from "./testing/toy-runner";

const bundled = useBundledModel();

function engineOn(runner: ModelRunner, specTokens: number, steps: StepStats[] = []): Engine {
  return createEngine({ runner, blockSize: 4, numKvBlocks: 256, maxNumSeqs: 8, maxBatchTokens: 64, maxQueue: 16, serverId: "v", specTokens, onStep: (s) => steps.push(s) });
}

async function run(engine: Engine, reqs: GenerateParams[]): Promise<{ tokens: number[][]; logprobs: number[][]; tops: number[][][] }> {
  const outs = await generateAll(engine, reqs);
  return { tokens: outs.map((o) => o.tokens), logprobs: outs.map((o) => o.logprobs), tops: outs.map((o) => o.tops.map((t) => t.map((x) => x.token))) };
}

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

/** Counts the device-sampled sequences of each forwardSampled call that brought proposals (several logits rows). */
function countVerifyRows(r: ReturnType<typeof withDeviceSampling>): { rows: number } {
  const seen = { rows: 0 };
  const inner = r.forwardSampled.bind(r);
  r.forwardSampled = (step, sampling, chain) => {
    step.seqs.forEach((q, i) => {
      if (q.numLogits > 1 && !sampling[i]!.host) seen.rows++;
    });
    return inner(step, sampling, chain);
  };
  return seen;
}

test("greedy verify steps on the device: the greedy output, in as few steps as on the host, no logits downloaded", async () => {
  const prompt = [...range(12, 2), ...range(12, 2), ...range(12, 2)];
  const req: GenerateParams = { promptTokenIds: prompt, stop: { maxTokens: 40 } };
  const hostSteps: StepStats[] = [];
  const host = await run(engineOn(createToyRunner({ vocabSize: 64, period: 12 }), 4, hostSteps), [req]);
  const r = withDeviceSampling(createToyRunner({ vocabSize: 64, period: 12 }));
  const verify = countVerifyRows(r);
  const steps: StepStats[] = [];
  const dev = await run(engineOn(r, 4, steps), [req]);
  expect(dev.tokens[0]).toEqual(toyContinuation(prompt, 40, 64, 12));
  expect(dev.tokens).toEqual(host.tokens);
  expect(steps.length).toBe(hostSteps.length);
  expect(steps.length).toBeLessThanOrEqual(12); // verify steps of 4 accepted proposals, not 40 decode steps
  expect(r.calls.every((c) => c === "forwardSampled")).toBe(true);
  expect(r.sampled.every((s) => s.every((x) => !x.host))).toBe(true);
  expect(verify.rows).toBeGreaterThanOrEqual(8);
});

test("rejected proposals, several sequences, top_logprobs and min_tokens on the bundled model: the host's tokens", async () => {
  const enc = (t: string) => bundled.m.tokenizer.encode(t);
  const reqs: GenerateParams[] = [
    { promptTokenIds: enc("a river is a river is a river is a"), stop: { maxTokens: 30, ignoreEos: true } },
    { promptTokenIds: enc("The word house means"), stop: { maxTokens: 30, ignoreEos: true }, topLogprobs: 3 },
    // min_tokens: a verify step whose proposals cross it stays on the host (gpu-sampling.test.ts), later ones do not
    { promptTokenIds: enc("A tree is a tree is a tree"), stop: { maxTokens: 30, minTokens: 6 } },
  ];
  const host = await run(engineOn(bundled.m.runner, 3), reqs);
  const r = withDeviceSampling(bundled.m.runner, { extras: true });
  const verify = countVerifyRows(r);
  const steps: StepStats[] = [];
  const dev = await run(engineOn(r, 3, steps), reqs);
  expect(dev.tokens).toEqual(host.tokens);
  dev.logprobs.forEach((lp, i) => lp.forEach((x, j) => expect(x).toBeCloseTo(host.logprobs[i]![j]!, 4)));
  expect(dev.tops).toEqual(host.tops);
  expect(dev.tops[1]!.every((t) => t.length === 3)).toBe(true);
  // verify steps happened and went to the device
  expect(verify.rows).toBeGreaterThanOrEqual(5);
  expect(steps.filter((s) => s.deviceSampled).length).toBeGreaterThan(10);
  expect(dev.tokens.every((t, i) => t.length === host.tokens[i]!.length)).toBe(true);
});
