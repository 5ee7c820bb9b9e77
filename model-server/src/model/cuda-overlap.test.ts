/**
 * Two steps in flight on the CUDA runner (native-cuda/src/model_steps.cu; GPU only, skipped elsewhere): a decode
 * step launched before the previous one returns, its tokens chained from that step's sampled ids on the GPU, gives
 * the ids of the same steps run one at a time with the ids fed back by the host (the Qwen3-MoE fixture, greedy and
 * seeded, four sequences, graphs on); the addon refuses a third step in flight, a second logits download and a chain
 * row the previous step does not have. The engine over this runner (which overlaps a steady decode batch:
 * engine/lookahead.ts) is checked in engine/engine-cuda.test.ts (bundled for the GPU machine: the engine imports
 * @dispatch/common).
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { probeCuda } from "../backend/cuda/native";
import { createCudaRunner, type CudaModelRunner, type GpuSampling } from "./cuda-runner";
import { DECODE_BATCH_BLOCKS, DECODE_PROMPTS, decodeStep, prefillStep } from "./testing/decode-batch";

const probe = probeCuda();
const DIR = join(import.meta.dir, "..", "..", "fixtures", "golden", "qwen3_moe");
const PROMPTS = DECODE_PROMPTS;
const STEPS = 20;
const sampling = (step: number): GpuSampling[] => PROMPTS.map((_, s) => (s % 2 === 0 ? { temperature: 0, topK: 0, topP: 1, seed: 0, step } : { temperature: 0.8, topK: 20, topP: 0.95, seed: 11 + s, step }));

async function prefill(runner: CudaModelRunner): Promise<number[]> {
  const out = await runner.forwardSampled(prefillStep(), sampling(0));
  return out.map((r) => r.ids[0]!);
}

/** The message a promise rejects with ("" if it resolves); awaited in try/catch (docs/findings.md: Bun's rejects matcher). */
async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "";
  } catch (e) {
    return (e as Error).message;
  }
}


test.skipIf(!probe.ok)("chained decode steps, two in flight, give the ids of one step at a time", async () => {
  const runner = await createCudaRunner({ dir: DIR });
  runner.allocateKv(DECODE_BATCH_BLOCKS, 16);
  // one at a time, the host feeding the ids back
  let next = await prefill(runner);
  const plain: number[][] = [];
  for (let i = 0; i < STEPS; i++) {
    const out = await runner.forwardSampled(decodeStep(i, next), sampling(i + 1));
    next = out.map((r) => r.ids[0]!);
    plain.push(next);
  }
  // overlapped: step i + 1 is launched before step i returns, its tokens read on the GPU from step i's ids
  const first = await prefill(runner);
  const chain = Int32Array.from(PROMPTS, (_, s) => s);
  const placeholders = PROMPTS.map(() => 0);
  const overlapped: number[][] = [];
  let pending = runner.forwardSampled(decodeStep(0, first), sampling(1));
  for (let i = 0; i < STEPS; i++) {
    const ahead = i + 1 < STEPS ? runner.forwardSampled(decodeStep(i + 1, placeholders), sampling(i + 2), chain) : null;
    if (i === 3) expect(await rejection(runner.forwardSampled(decodeStep(i + 2, placeholders), sampling(i + 3), chain))).toMatch(/two steps are already in flight/);
    overlapped.push((await pending).map((r) => r.ids[0]!));
    if (ahead) pending = ahead;
  }
  expect(overlapped).toEqual(plain);
  expect(runner.graphsCaptured()).toBeGreaterThanOrEqual(1);
  // a chain entry naming a row the previous step does not have is refused by the step
  expect(await rejection(runner.forwardSampled(decodeStep(0, first), sampling(1), Int32Array.of(0, 1, 2, 9)))).toMatch(/names row 9 of the previous sampled step, which has 4 rows/);
  // two logits downloads at once are refused (the model has one pinned logits buffer)
  const logits = runner.forward(decodeStep(0, first));
  expect(await rejection(runner.forward(decodeStep(0, first)))).toMatch(/downloads logits is already in flight/);
  await logits;
  // and the model still steps afterwards
  const again = await runner.forwardSampled(decodeStep(0, first), sampling(1));
  expect(again.map((r) => r.ids[0]!)).toEqual(plain[0]!);
  runner.close();
});
