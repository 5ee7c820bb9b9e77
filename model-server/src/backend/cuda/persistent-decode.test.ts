/**
 * One-token steps with every layer in one persistent kernel (native-cuda/src/decode_b1.cu; runner persistentDecode,
 * DISPATCH_CUDA_PERSISTENT_DECODE) against the chain of kernels per layer, on the GPU (skipped elsewhere with the
 * reason): two-layer models at real shapes with random weights, one sequence, so every decode step after the prompt's
 * prefill is a batch-1 step (a CUDA graph after its first). The kernel writes each step's K/V itself, so a wrong
 * cache slot shows in the steps after it; prompts of 3 tokens (context splits left empty), 300 and 1,100 tokens (a
 * split longer than one pass of the CTA's positions) cover the attention's edges.
 *
 * Bounds (decode-compare.ts): the two paths sum in different orders, so logits agree to bf16 level and the argmax on
 * clear steps; a second run of the kernel gives the same bits (every sum has a fixed order).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeCuda } from "./native";
import { createCudaRunner, type CudaModelRunner } from "../../model/cuda-runner";
import { compareLogits, decode, decodeTable, expectSameBits } from "../../model/testing/decode-compare";
import { writeRandomQwen3Moe } from "../../model/testing/random-qwen3-moe";

const probe = probeCuda();
if (!probe.ok) console.error(`[persistent-decode] skipped: ${probe.reason}`);

const STEPS = 12;

/** The op groups of one more one-token step (the last decoded position again). */
function groups(runner: CudaModelRunner, prompt: number[], token: number): string[] {
  const step = { seqs: [{ tokens: Int32Array.of(token), startPos: prompt.length + STEPS - 1, blockTable: decodeTable(prompt.length, STEPS), numLogits: 1 }] };
  return Object.keys(runner.profileStep(step));
}

async function check(name: string, overrides: Record<string, unknown>, promptLen: number) {
  const dir = mkdtempSync(join(tmpdir(), "persistent-decode-"));
  const prompt = Array.from({ length: promptLen }, (_, i) => (i * 7919 + 13) % 150000);
  try {
    writeRandomQwen3Moe(dir, { num_hidden_layers: 2, ...overrides }, 5);
    const chainRunner = await createCudaRunner({ dir, persistentDecode: false });
    const chain = await decode(chainRunner, prompt, STEPS);
    const chainGroups = groups(chainRunner, prompt, chain.tokens.at(-1)!);
    chainRunner.close();
    const kernelRunner = await createCudaRunner({ dir, persistentDecode: true });
    const kernel = await decode(kernelRunner, prompt, STEPS, chain.tokens);
    const again = await decode(kernelRunner, prompt, STEPS, chain.tokens);
    const kernelGroups = groups(kernelRunner, prompt, chain.tokens.at(-1)!);
    expect(kernelRunner.graphsCaptured()).toBeGreaterThan(0);
    kernelRunner.close();
    expect(chainGroups).not.toContain("persistent_decode");
    expect(kernelGroups).toContain("persistent_decode");
    expect(kernelGroups).not.toContain("qkv_proj");
    compareLogits("persistent-decode", name, chain.logits, kernel.logits);
    expectSameBits(again.logits, kernel.logits);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe.skipIf(!probe.ok)("one-token steps: one persistent kernel vs the kernel chain", () => {
  test("Qwen3-30B-A3B shape, 300-token prompt", () => check("qwen3-30b-a3b x2, 300", {}, 300));
  test("Qwen3-30B-A3B shape, 3-token prompt (empty context splits)", () => check("qwen3-30b-a3b x2, 3", {}, 3));
  test("Qwen3-30B-A3B shape, 1,100-token prompt (two passes per split)", () => check("qwen3-30b-a3b x2, 1100", {}, 1100));
  test("192 experts of 512, top-6", () => check("192 x 512 top-6", { num_experts: 192, moe_intermediate_size: 512, num_experts_per_tok: 6 }, 300));
});
