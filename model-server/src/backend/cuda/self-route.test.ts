/**
 * One-token steps whose gate|up GEMM routes itself (kernels/src/gemm: moe_gate_up_self_routed, native-cuda's
 * DISPATCH_CUDA_SELF_ROUTE / runner selfRoute) against the routing kernel + gate|up they replace, on the GPU (skipped
 * elsewhere with the reason): two-layer models at real shapes with random weights (the tiny fixtures' shapes take
 * the reference GEMM, not the kernels' path). The self-routed GEMM runs the same top-k, the same GEMM body and
 * writes the same routing, so every decode step's logits are the same bits; the step's op groups show which path
 * ran (profileStep). A wrong expert, rank or slot changes the logits.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeCuda } from "./native";
import { createCudaRunner, type CudaModelRunner } from "../../model/cuda-runner";
import { decode, decodeTable, expectSameBits } from "../../model/testing/decode-compare";
import { writeRandomQwen3Moe } from "../../model/testing/random-qwen3-moe";

const probe = probeCuda();
if (!probe.ok) console.error(`[self-route] skipped: ${probe.reason}`);

const PROMPT = Array.from({ length: 200 }, (_, i) => (i * 7919 + 13) % 150000);
const STEPS = 12;

/** The op groups of one more one-token step (the last decoded position again). */
function groups(runner: CudaModelRunner, token: number): string[] {
  const step = { seqs: [{ tokens: Int32Array.of(token), startPos: PROMPT.length + STEPS - 1, blockTable: decodeTable(PROMPT.length, STEPS), numLogits: 1 }] };
  return Object.keys(runner.profileStep(step));
}

async function check(overrides: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "self-route-"));
  try {
    writeRandomQwen3Moe(dir, { num_hidden_layers: 2, ...overrides }, 11);
    const chainRunner = await createCudaRunner({ dir, selfRoute: false });
    const chain = await decode(chainRunner, PROMPT, STEPS);
    const chainGroups = groups(chainRunner, chain.tokens.at(-1)!);
    chainRunner.close();
    const routedRunner = await createCudaRunner({ dir, selfRoute: true });
    const routed = await decode(routedRunner, PROMPT, STEPS, chain.tokens);
    const routedGroups = groups(routedRunner, chain.tokens.at(-1)!);
    expect(routedRunner.graphsCaptured()).toBeGreaterThan(0);
    routedRunner.close();
    expect(chainGroups).toContain("topk_align_permute");
    expect(chainGroups).not.toContain("self_routed_experts");
    expect(routedGroups).toContain("self_routed_experts");
    expect(routedGroups).not.toContain("topk_align_permute");
    // the prompt's prefill takes the routing kernel in both; every one-token step after it is self-routed
    expectSameBits(routed.logits, chain.logits);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe.skipIf(!probe.ok)("one-token steps: gate|up routing itself vs the routing kernel", () => {
  test("Qwen3-30B-A3B shape (128 experts of 768, top-8): same logits, bit for bit", () => check({}));
  test("192 experts of 512, top-6 (the top-k's 16-slot lanes): same logits, bit for bit", () => check({ num_experts: 192, moe_intermediate_size: 512, num_experts_per_tok: 6 }));
});
