import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { classify } from "./near-ties";

// The first H200 run's greedy continuations (transformers bf16 and the CUDA backend, 64 tokens,
// 3 prompts per fixture), classified against the fp32 CPU reference.
const RESULTS = join(import.meta.dir, "..", "..", "..", "bench", "serving", "results");
const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "golden");
const hf = JSON.parse(readFileSync(join(RESULTS, "h200-2026-11-29-hf-bf16-greedy.json"), "utf8"));
const ours: Record<string, { agree: number; ourToken?: number }[]> = {};
for (const line of readFileSync(join(RESULTS, "h200-2026-11-29-cuda-greedy.jsonl"), "utf8").split("\n")) {
  if (line.trim() && JSON.parse(line).arch) ours[JSON.parse(line).arch] = JSON.parse(line).prompts;
}

describe("greedy divergences against the fp32 reference", () => {
  test("every divergence of the H200 run is a near-tie of the fp32 reference", async () => {
    const r = await classify(hf, ours, FIXTURES);
    expect(r.divergences.length).toBe(9);
    expect(r.divergences.every((d) => d.nearTie && d.refGap < 0.08)).toBe(true);
    expect(r.share).toBe(1);
  }, 60_000);

  test("a divergence to a token outside the reference's top two counts every remaining position", async () => {
    const first = ours.qwen3_moe![0]!;
    const r1 = await classify(hf, { qwen3_moe: [first] }, FIXTURES);
    const [d] = r1.divergences;
    const outsider = [0, 1, 2, 3].find((t) => !d!.refTop2.includes(t))!;
    const r2 = await classify(hf, { qwen3_moe: [{ ...first, ourToken: outsider }] }, FIXTURES);
    expect(r2.divergences[0]!.nearTie).toBe(false);
    expect(r2.compared).toBe(64);
    expect(r2.share).toBeCloseTo(first.agree / 64, 6);
  }, 60_000);
});
