/**
 * L2 pulls on a side stream (native-cuda/src/l2_ahead.h; GPU only, skipped elsewhere): every pull
 * point on must leave every logit bit-identical to none (they only read weights), through eager
 * prefill chunks and batched decode steps replayed from CUDA graphs (whose capture must join the
 * side stream, or it fails and graphs go off), in bf16 and with int8 experts; an unknown point is refused.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { probeCuda } from "../backend/cuda/native";
import { createCudaRunner } from "./cuda-runner";
import { BLOCK, blockTables, prefillInTwoChunks, type Golden } from "./testing/golden-check";

const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "golden");
const probe = probeCuda();
const DECODE_STEPS = 6;

/** Prefill logits of every case, then DECODE_STEPS batched decode steps fed the fixture's greedy tokens. */
async function run(dir: string, int8Experts: boolean, l2Ahead: string): Promise<{ logits: Float32Array[]; graphs: number }> {
  const golden: Golden = JSON.parse(readFileSync(join(dir, "golden.json"), "utf8"));
  const cases = golden.cases;
  const runner = await createCudaRunner({ dir, int8Experts, l2Ahead });
  try {
    const maxLen = Math.max(...cases.map((c) => c.prompt.length + c.greedy.length));
    const tables = blockTables(cases.length, maxLen);
    runner.allocateKv(cases.length * tables[0]!.length, BLOCK);
    const logits = await prefillInTwoChunks(runner, cases, tables);
    for (let s = 0; s < DECODE_STEPS; s++) {
      const out = await runner.forward({
        seqs: cases.map((c, i) => ({ tokens: Int32Array.of(c.greedy[s]!), startPos: c.prompt.length + s, blockTable: tables[i]!, numLogits: 1 })),
      });
      logits.push(...out);
    }
    return { logits, graphs: runner.graphsCaptured() };
  } finally {
    runner.close();
  }
}

describe.skipIf(!probe.ok)("L2 pulls ahead of the GEMMs (CUDA)", () => {
  for (const int8Experts of [false, true]) {
    for (const arch of ["qwen3_moe", "mixtral", "deepseek_moe"]) {
      test(`${arch}${int8Experts ? " int8 experts" : ""}: every point on, logits bit-identical to none, decode graphs captured`, async () => {
        const dir = join(FIXTURES, arch);
        const off = await run(dir, int8Experts, "");
        const on = await run(dir, int8Experts, "o,qkv,qkv-early,down");
        expect(on.graphs).toBeGreaterThan(0);
        expect(on.graphs).toBe(off.graphs);
        expect(on.logits.length).toBe(off.logits.length);
        let maxDiff = 0;
        on.logits.forEach((row, i) => {
          const ref = off.logits[i]!;
          expect(row.length).toBe(ref.length);
          for (let j = 0; j < row.length; j++) maxDiff = Math.max(maxDiff, Math.abs(row[j]! - ref[j]!));
        });
        expect(maxDiff).toBe(0);
      });
    }
  }

  test("an unknown point is refused with the list of points", async () => {
    await expect(createCudaRunner({ dir: join(FIXTURES, "qwen3_moe"), l2Ahead: "o,attention" })).rejects.toThrow(/unknown point 'attention'.*qkv-early/);
  });
});
