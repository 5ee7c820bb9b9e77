import { expect, test } from "bun:test";
import { decodeWeightBytes } from "../../model-server/src/backend/cuda/random-weights";
import { modelShape } from "./shapes";

test("Qwen3-30B-A3B shape: 3.3B active parameters per token read at batch 1", () => {
  const c = modelShape("qwen3-30b-a3b");
  expect(c.numLayers).toBe(48);
  expect(c.layers.every((l) => l.kind === "moe" && l.numExperts === 128 && l.topK === 8 && l.intermediate === 768)).toBe(true);
  // attention 48 * (5120 + 4096) * 2048, experts 48 * 8 * 3 * 768 * 2048, LM head 151936 * 2048
  const bytes = decodeWeightBytes(c, 1);
  expect(bytes / 2 / 1e9).toBeGreaterThan(2.9);
  expect(bytes / 2 / 1e9).toBeLessThan(3.4);
  // more tokens touch more distinct experts, never more than all of them
  expect(decodeWeightBytes(c, 64)).toBeGreaterThan(decodeWeightBytes(c, 1));
  expect(decodeWeightBytes(c, 4096)).toBeLessThan(2 * 31e9 * 1.01);
});

test("deepseek-moe-16b shape: first layer dense, 2 shared experts folded into one MLP", () => {
  const c = modelShape("deepseek-moe-16b");
  expect(c.numLayers).toBe(28);
  expect(c.layers[0]!.kind).toBe("dense");
  const l1 = c.layers[1]!;
  expect(l1.kind === "moe" && l1.numExperts === 64 && l1.topK === 6 && l1.sharedIntermediate === 2 * 1408).toBe(true);
});

test("an unknown shape names the known ones", () => {
  expect(() => modelShape("gpt-5")).toThrow("qwen3-30b-a3b");
});

test("decodeWeightBytes: zipf-skewed routing reads fewer bytes at batch 64, the same at batch 1", () => {
  const c = modelShape("qwen3-30b-a3b");
  expect(decodeWeightBytes(c, 64, 2, 1)).toBeLessThan(decodeWeightBytes(c, 64, 2, 0));
  expect(decodeWeightBytes(c, 1, 2, 1)).toBeCloseTo(decodeWeightBytes(c, 1, 2, 0), 0);
});
