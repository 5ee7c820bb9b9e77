/**
 * Few-token steps' routed experts as self-routing GEMVs (native-cuda/src/moe_gemv.cu) against the routing kernel +
 * grouped GEMMs they replace, on the GPU (skipped elsewhere with the reason): two-layer models at real shapes with
 * random weights (the tiny fixtures' shapes take the reference GEMM, not the fused-SiLU layout the GEMVs read).
 * One sequence (every decode step a batch-1 step, replayed from a CUDA graph after its first) and four sequences
 * (batch-4 steps). Both runners get the same prompts and tokens; logits agree to bf16 level
 * (model/testing/decode-compare.ts: the two paths sum in different orders), and a second run of the GEMV path gives
 * the same bits. A wrong expert, choice or slot moves most steps far past the bound.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeCuda } from "./native";
import { createCudaRunner, type CudaModelRunner } from "../../model/cuda-runner";
import { compareLogits, decode } from "../../model/testing/decode-compare";
import { DECODE_BATCH_BLOCKS, decodeStep, prefillStep } from "../../model/testing/decode-batch";
import { writeRandomQwen3Moe } from "../../model/testing/random-qwen3-moe";
import { top2 } from "../../model/testing/top2";

const probe = probeCuda();
if (!probe.ok) console.error(`[moe-gemv] skipped: ${probe.reason}`);

const same = (a: Float32Array[], b: Float32Array[]) => a.every((row, s) => Buffer.from(row.buffer, row.byteOffset, row.byteLength).equals(Buffer.from(b[s]!.buffer, b[s]!.byteOffset, b[s]!.byteLength)));

function withModel(overrides: Record<string, unknown>, body: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "moe-gemv-"));
  writeRandomQwen3Moe(dir, { num_hidden_layers: 2, ...overrides }, 11);
  return body(dir).finally(() => rmSync(dir, { recursive: true, force: true }));
}

async function checkOne(name: string, overrides: Record<string, unknown>) {
  await withModel(overrides, async (dir) => {
    const prompt = Array.from({ length: 200 }, (_, i) => (i * 7919 + 13) % 150000);
    const gemmRunner = await createCudaRunner({ dir, moeGemvMaxTokens: 0 });
    const gemm = await decode(gemmRunner, prompt, 12);
    gemmRunner.close();
    const gemvRunner = await createCudaRunner({ dir, moeGemvMaxTokens: 1 });
    const gemv = await decode(gemvRunner, prompt, 12, gemm.tokens);
    const again = await decode(gemvRunner, prompt, 12, gemm.tokens);
    expect(gemvRunner.graphsCaptured()).toBeGreaterThan(0);
    gemvRunner.close();
    compareLogits("moe-gemv", name, gemm.logits, gemv.logits);
    expect(same(again.logits, gemv.logits)).toBe(true);
  });
}

/** Four sequences stepped together (batch-4 steps), feeding `feed` or the run's own greedy tokens: logits rows per step. */
async function decodeFour(runner: CudaModelRunner, steps: number, feed?: number[][]): Promise<{ rows: Float32Array[]; tokens: number[][] }> {
  runner.allocateKv(DECODE_BATCH_BLOCKS, 16);
  const V = runner.spec.vocabSize;
  let out = (await runner.forward(prefillStep())).map((r) => r.slice(0, V));
  const rows = [...out];
  const tokens: number[][] = [];
  for (let i = 0; i < steps; i++) {
    const next = feed ? feed[i]! : out.map((r) => top2(r).best);
    tokens.push(next);
    out = (await runner.forward(decodeStep(i, next))).map((r) => r.slice(0, V));
    rows.push(...out);
  }
  return { rows, tokens };
}

describe.skipIf(!probe.ok)("few-token routed experts: self-routing GEMVs vs routing + grouped GEMMs", () => {
  test("Qwen3-30B-A3B shape (128 experts of 768, top-8), batch 1", () => checkOne("qwen3-30b-a3b x2", {}));
  test("deepseek-moe-16b-like routing (64 experts of 1408, top-6), batch 1", () => checkOne("64x1408 top-6 x2", { num_experts: 64, moe_intermediate_size: 1408, num_experts_per_tok: 6 }));
  test("Qwen3-30B-A3B shape, batch 4", () =>
    withModel({}, async (dir) => {
      const gemmRunner = await createCudaRunner({ dir, moeGemvMaxTokens: 0 });
      const gemm = await decodeFour(gemmRunner, 8);
      gemmRunner.close();
      const gemvRunner = await createCudaRunner({ dir, moeGemvMaxTokens: 4 });
      const gemv = await decodeFour(gemvRunner, 8, gemm.tokens);
      const again = await decodeFour(gemvRunner, 8, gemm.tokens);
      gemvRunner.close();
      compareLogits("moe-gemv", "qwen3-30b-a3b x2, batch 4", gemm.rows, gemv.rows);
      expect(same(again.rows, gemv.rows)).toBe(true);
    }));
});
