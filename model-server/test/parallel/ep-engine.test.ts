/**
 * The real engine (scheduler, block manager, prefix reuse, preemption) over expert-parallel
 * loopback ranks: rank 0's plans place each sequence by its first block, the other ranks follow.
 * Concurrent greedy requests under a KV budget tight enough to force preemption, then again with
 * every prefix cached, must give exactly the tokens of the single-rank CPU runner.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Engine, EngineOptions, GenerateParams } from "../../src/engine/engine";
import { createEpCpuRunner, type EpCpuRunner } from "../../src/parallel/ep-cpu-runner";
import { loadServedModel, type ServedModel } from "../../src/rpc/load-model";
import { createEngineKit, generatedTokens as tokens } from "../engine-kit";
import { bundledModelDir } from "../harness";

let model: ServedModel;
let ep: EpCpuRunner;
const kit = createEngineKit();

beforeAll(async () => {
  model = await loadServedModel(bundledModelDir(), { backend: "cpu" });
  ep = await createEpCpuRunner({ dir: bundledModelDir(), ranks: 2, placement: [[0, 1, 2], [3, 4, 5, 6, 7]], lowLatencyMaxTokens: 8, timeoutMs: 20_000 });
});
afterAll(async () => {
  await kit.closeAll();
  model?.runner.close();
  ep?.close();
});

function engine(runner: EngineOptions["runner"], o: Partial<EngineOptions> = {}): Engine {
  return kit.engine({ runner, tokenBytes: model.tokenBytes, ...o });
}

const prompts = [0, 1, 2, 3].map((i) => Array.from({ length: 30 + 7 * i }, (_, j) => (j * 37 + i * 101 + 11) % 4000));
const req = (p: number[]): GenerateParams => ({ promptTokenIds: p, stop: { maxTokens: 16, ignoreEos: true } });

test("EP=2 (uneven placement) serves the same greedy tokens as one rank, with preemption and prefix reuse", async () => {
  const plain = engine(model.runner);
  const expected = await Promise.all(prompts.map((p) => tokens(plain, req(p))));
  const tight = engine(ep, { numKvBlocks: 8 });
  expect(await Promise.all(prompts.map((p) => tokens(tight, req(p))))).toEqual(expected);
  expect(await Promise.all(prompts.map((p) => tokens(tight, req(p))))).toEqual(expected);
  expect(tight.load().kvBlocksUsed).toBe(0);
  const total = ep.stats.map((s) => s.htCalls + s.llCalls);
  expect(new Set(total).size).toBe(1);
  expect(ep.stats.every((s) => s.rowsComputed > 0)).toBe(true);
  expect(ep.stats[0]!.llCalls).toBeGreaterThan(0);
  expect(ep.stats[0]!.htCalls).toBeGreaterThan(0);
}, 60_000);
