/**
 * One-token steps' routed experts as GEMVs (native-cuda/src/moe_gemv.cu) against the grouped GEMMs they replace, on
 * the GPU (skipped elsewhere with the reason): two-layer models at real shapes with random weights (the tiny
 * fixtures' shapes take the reference GEMM, not the fused-SiLU layout the GEMVs read), one sequence, so every decode
 * step is a batch-1 step, replayed from a CUDA graph after its first. Both runners get the same prompt and tokens;
 * logits agree to bf16 level (model/testing/decode-compare.ts: the two paths round in different places), and a
 * second run of the GEMV path gives the same bits. A wrong expert, row or slot moves most steps far past the bound.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeCuda } from "./native";
import { createCudaRunner } from "../../model/cuda-runner";
import { compareLogits, decode } from "../../model/testing/decode-compare";
import { writeRandomQwen3Moe } from "../../model/testing/random-qwen3-moe";

const probe = probeCuda();
if (!probe.ok) console.error(`[moe-gemv] skipped: ${probe.reason}`);

async function check(name: string, overrides: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "moe-gemv-"));
  try {
    writeRandomQwen3Moe(dir, { num_hidden_layers: 2, ...overrides }, 11);
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
    again.logits.forEach((row, s) => expect(Buffer.from(row.buffer).equals(Buffer.from(gemv.logits[s]!.buffer))).toBe(true));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe.skipIf(!probe.ok)("one-token routed experts: GEMVs vs the grouped GEMMs", () => {
  test("Qwen3-30B-A3B shape (128 experts of 768, top-8)", () => check("qwen3-30b-a3b x2", {}));
  test("deepseek-moe-16b-like routing (64 experts of 1408, top-6)", () => check("64x1408 top-6 x2", { num_experts: 64, moe_intermediate_size: 1408, num_experts_per_tok: 6 }));
});
