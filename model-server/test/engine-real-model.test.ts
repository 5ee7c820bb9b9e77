/**
 * The engine over the real CPU runner and the bundled model (in process): the
 * bookkeeping paths that move real KV — prefix reuse, preemption and
 * recompute, verify steps, KV export/import — must give exactly the tokens of
 * a plain greedy run.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Engine, EngineOptions, GenerateParams } from "../src/engine/engine";
import { loadServedModel, type ServedModel } from "../src/rpc/load-model";
import { createEngineKit, generatedTokens as tokens } from "./engine-kit";
import { bundledModelDir } from "./harness";

let model: ServedModel;
const kit = createEngineKit();

beforeAll(async () => {
  model = await loadServedModel(bundledModelDir(), { backend: "cpu" });
});
afterAll(async () => {
  await kit.closeAll();
  model?.runner.close();
});

/** Engines share the one runner: each allocateKv() resets its cache, so only one engine is used at a time. */
function engine(o: Partial<EngineOptions> = {}): Engine {
  return kit.engine({ runner: model.runner, tokenBytes: model.tokenBytes, ...o });
}

const prompts = [0, 1, 2, 3].map((i) => Array.from({ length: 40 + 7 * i }, (_, j) => (j * 37 + i * 101 + 11) % 4000));
const req = (p: number[]): GenerateParams => ({ promptTokenIds: p, stop: { maxTokens: 32, ignoreEos: true } });

test("preemption under KV exhaustion and prefix reuse reproduce the plain greedy tokens", async () => {
  const plain = engine();
  const expected: number[][] = [];
  for (const p of prompts) expected.push(await tokens(plain, req(p)));
  // 10 blocks of 16 = 160 positions for four sequences that end at 72-93 tokens each: they must take turns.
  const tight = engine({ numKvBlocks: 10 });
  const got = await Promise.all(prompts.map((p) => tokens(tight, req(p))));
  expect(got).toEqual(expected);
  expect(tight.load().kvBlocksUsed).toBe(0);
  // Again, now with every prompt's prefix cached.
  const again = await Promise.all(prompts.map((p) => tokens(tight, req(p))));
  expect(again).toEqual(expected);
});

test("prompt-lookup verify steps give exactly the greedy tokens", async () => {
  const rep = [...prompts[0]!.slice(0, 20), ...prompts[0]!.slice(0, 20), ...prompts[0]!.slice(0, 20)];
  const plain = await tokens(engine(), req(rep));
  const spec = await tokens(engine({ specTokens: 4 }), req(rep));
  expect(spec).toEqual(plain);
});

test("KV exported mid-generation and imported elsewhere continues exactly", async () => {
  const p = prompts[1]!;
  const expected = await tokens(engine(), req(p));
  const src = engine();
  const stream = src.generate({ requestId: "x", ...req(p) });
  const it = stream[Symbol.asyncIterator]();
  await it.next(); // prefill done, first token out
  const { tokenIds, kv } = src.exportKv("x");
  expect(tokenIds).toEqual(p);
  stream.cancel();
  while (!(await it.next()).done);
  const dst = engine(); // reallocates the runner's KV: only the exported copy survives
  const got = await tokens(dst, { ...req(p), importedKv: kv });
  expect(got).toEqual(expected);
});
