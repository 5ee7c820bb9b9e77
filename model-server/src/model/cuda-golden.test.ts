/**
 * Golden fixtures on the CUDA backend (runs where a GPU is; skipped elsewhere with the reason).
 * Same fixtures and schedule as golden.test.ts (block size 4, scrambled blocks, three prompts
 * batched, prefill in two chunks, then batched greedy decoding from CUDA graphs), against the
 * fp32 reference, with bounds for bf16: weights, the KV cache and GEMM inputs are bf16 on the
 * GPU (fp32 accumulation, fp32 residual stream and router).
 *
 * bf16 rounding can flip a router's choice where two experts' scores nearly tie, and a flipped
 * expert moves that token's logits far more than rounding does. So the bounds are on the
 * distribution over prompt positions, which a real bug (a wrong index, a wrong mask, a wrong
 * layout) breaks at most positions:
 *   - max |logit diff| <= TOL at >= 90% of prompt positions, and the median position <= TOL / 2;
 *   - the argmax equals the reference's at >= 95% of positions whose reference top-2 gap > 2 * TOL;
 *   - greedy 32 tokens: at least half of all tokens identical before each prompt's first
 *     divergence (the agreement and each divergence's own top-2 gap are printed).
 * TOL = 0.08 (~2% of the largest |logit|, ~3.6) in bf16; 0.25 with int8 weight-only experts.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { readSafetensorsHeader, readTensorF32 } from "../loader/safetensors";
import { probeCuda } from "../backend/cuda/native";
import { createCudaRunner } from "./cuda-runner";
import { BLOCK, blockTables, prefillInTwoChunks } from "./testing/golden-check";
import { top2 } from "./testing/top2";

const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "golden");
const ARCHS = ["mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_moe"];
const probe = probeCuda();
if (!probe.ok) console.error(`[cuda-golden] skipped: ${probe.reason}`);

for (const int8Experts of [false, true]) {
  describe.skipIf(!probe.ok)(`golden on CUDA (bf16${int8Experts ? ", int8 experts" : ""})`, () => {
    const TOL = int8Experts ? 0.25 : 0.08;
    for (const arch of ARCHS) {
      test(`${arch}: logits within ${TOL} at >= 90% of positions, argmax where the reference is clear, greedy agreement`, async () => {
        const dir = join(FIXTURES, arch);
        const golden: { cases: { prompt: number[]; greedy: number[] }[] } = JSON.parse(readFileSync(join(dir, "golden.json"), "utf8"));
        // bf16 loads straight from the files (the default); the int8 run takes the fp32 loader path, so both get checked
        const runner = await createCudaRunner({ dir, int8Experts, directLoad: !int8Experts });
        const V = runner.spec.vocabSize;
        const cases = golden.cases;
        const maxLen = Math.max(...cases.map((c) => c.prompt.length + c.greedy.length));
        const tables = blockTables(cases.length, maxLen);
        runner.allocateKv(cases.length * tables[0]!.length, BLOCK);
        const got = await prefillInTwoChunks(runner, cases, tables);
        const header = readSafetensorsHeader(join(dir, "expected.safetensors"));
        const posDiff: number[] = [];
        let clear = 0;
        let clearAgree = 0;
        cases.forEach((c, i) => {
          const want = readTensorF32(header.tensors[`logits.${i}`]!);
          for (let p = 0; p < c.prompt.length; p++) {
            const w = want.subarray(p * V, (p + 1) * V);
            const g = got[i]!.subarray(p * V, (p + 1) * V);
            let d = 0;
            for (let j = 0; j < V; j++) d = Math.max(d, Math.abs(w[j]! - g[j]!));
            posDiff.push(d);
            const ref = top2(w);
            if (ref.gap > 2 * TOL) {
              clear++;
              if (top2(g).best === ref.best) clearAgree++;
            }
          }
        });
        const sorted = [...posDiff].sort((a, b) => a - b);
        const within = posDiff.filter((d) => d <= TOL).length / posDiff.length;
        const median = sorted[Math.floor(sorted.length / 2)]!;

        // batched greedy decoding (decode steps replay CUDA graphs)
        const outs = cases.map(() => [] as { best: number; gap: number }[]);
        let next = cases.map((c, i) => top2(got[i]!.subarray((c.prompt.length - 1) * V, c.prompt.length * V)));
        const steps = Math.max(...cases.map((c) => c.greedy.length));
        for (let s = 0; s < steps; s++) {
          next.forEach((t, i) => outs[i]!.push(t));
          if (s === steps - 1) break;
          const out = await runner.forward({
            seqs: cases.map((c, i) => ({ tokens: Int32Array.of(outs[i]!.at(-1)!.best), startPos: c.prompt.length + s, blockTable: tables[i]!, numLogits: 1 })),
          });
          next = out.map(top2);
        }
        const agree = cases.map((c, i) => {
          let n = 0;
          while (n < c.greedy.length && outs[i]![n]!.best === c.greedy[n]) n++;
          return n;
        });
        const divergences = cases.map((c, i) => (agree[i]! < c.greedy.length ? `@${agree[i]} gap ${outs[i]![agree[i]!]!.gap.toFixed(3)}` : "none"));
        console.error(
          `[cuda-golden]${int8Experts ? " int8" : ""} ${arch}: positions within ${TOL}: ${(within * 100).toFixed(1)}%, median ${median.toFixed(4)}, max ${sorted.at(-1)!.toFixed(4)}; ` +
            `argmax ${clearAgree}/${clear} clear positions; greedy ${agree.join("/")} of ${cases.map((c) => c.greedy.length).join("/")} (divergence ${divergences.join(", ")}); graphs ${runner.graphsCaptured()}`,
        );
        expect(within).toBeGreaterThanOrEqual(0.9);
        expect(median).toBeLessThanOrEqual(TOL / 2);
        expect(clearAgree).toBeGreaterThanOrEqual(Math.floor(0.95 * clear));
        const total = cases.reduce((n, c) => n + c.greedy.length, 0);
        expect(agree.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(total / 2);
        runner.close();
      });
    }
  });
}
