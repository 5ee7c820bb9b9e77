/**
 * The one-token MoE block (native-cuda/src/moe_block.cu: o projection to the next input norm in one persistent
 * kernel) against the chain of kernels it replaces, on the GPU (skipped elsewhere with the reason). Both runners get
 * the same prompt and the same tokens (the chain's greedy choice), one sequence, so every decode step is a batch-1
 * step, replayed from a CUDA graph after its first: the block takes every MoE layer without a shared expert.
 *
 * Bounds: the two paths differ only in summation order and where bf16 rounding happens in fp32 sums, so logits agree
 * to bf16 level (max |diff| <= 2% of the largest |logit|) at >= 90% of the steps, and the argmax agrees at >= 95% of
 * the steps where the chain's top two are apart by more than that. Not every step: where two experts' router scores
 * nearly tie, that rounding can pick the other one (the tiny Mixtral fixture flips one in its 24th step, 0.83 apart),
 * which moves the step's logits far more; a wrong expert, row or weight moves most steps. The block's own result is the
 * same bits on a second identical run (every sum has a fixed order).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeCuda } from "./native";
import { createCudaRunner, type CudaModelRunner } from "../../model/cuda-runner";
import { compareLogits, decode, expectSameBits } from "../../model/testing/decode-compare";
import { writeRandomQwen3Moe } from "../../model/testing/random-qwen3-moe";

const FIXTURES = join(import.meta.dir, "..", "..", "..", "fixtures", "golden");
const probe = probeCuda();
if (!probe.ok) console.error(`[moe-block] skipped: ${probe.reason}`);

async function checkModel(name: string, dir: string, prompt: number[], steps: number) {
  const chainRunner = await createCudaRunner({ dir, moeBlock: false });
  const chain = await decode(chainRunner, prompt, steps);
  chainRunner.close();
  const blockRunner = await createCudaRunner({ dir, moeBlock: true });
  const block = await decode(blockRunner, prompt, steps, chain.tokens);
  const again = await decode(blockRunner, prompt, steps, chain.tokens);
  expect(blockRunner.graphsCaptured()).toBeGreaterThan(0);
  blockRunner.close();
  compareLogits("moe-block", name, chain.logits, block.logits);
  expectSameBits(again.logits, block.logits);
}

describe.skipIf(!probe.ok)("one-token MoE block vs the kernel chain", () => {
  for (const arch of ["mixtral", "qwen3_moe", "olmoe"]) {
    test(`${arch} fixture: 24 batch-1 decode steps`, async () => {
      const dir = join(FIXTURES, arch);
      const golden: { cases: { prompt: number[] }[] } = JSON.parse(readFileSync(join(dir, "golden.json"), "utf8"));
      await checkModel(arch, dir, golden.cases[0]!.prompt, 24);
    });
  }

  test("Qwen3-30B-A3B shape (2 layers, random weights, 300-token prompt): 12 batch-1 decode steps", async () => {
    const dir = mkdtempSync(join(tmpdir(), "moe-block-"));
    try {
      writeRandomQwen3Moe(dir, { num_hidden_layers: 2 }, 7);
      const prompt = Array.from({ length: 300 }, (_, i) => (i * 7919 + 13) % 150000);
      await checkModel("qwen3-30b-a3b x2", dir, prompt, 12);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
