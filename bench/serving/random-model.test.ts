import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readModelConfig } from "../../model-server/src/model/cpu-runner";
import { loadTokenizer } from "../../model-server/src/tokenizer/tokenizer";
import { modelShape } from "./shapes";
import { writeRandomModel } from "./random-model";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

test("a random Qwen3-30B-A3B directory: the real config, a tokenizer covering the vocabulary, the weights marker", () => {
  const dir = mkdtempSync(join(tmpdir(), "random-model-"));
  dirs.push(dir);
  writeRandomModel("qwen3-30b-a3b", dir, { seed: 3, zipf: 1.2 });
  expect(readdirSync(dir).sort()).toEqual(["config.json", "generation_config.json", "random-weights.json", "tokenizer.json", "tokenizer_config.json"]);
  const cfg = readModelConfig(dir);
  const shape = modelShape("qwen3-30b-a3b");
  expect({ ...cfg, modelId: "" }).toEqual({ ...shape, modelId: "", eosTokenIds: cfg.eosTokenIds });
  expect(cfg.eosTokenIds).toContain(151645);
  const tok = loadTokenizer(dir);
  try {
    expect(tok.vocabSize).toBe(151646);
    expect(tok.vocabSize).toBeLessThanOrEqual(cfg.vocabSize);
    expect(tok.specialTokens["<|im_end|>"]).toBe(151645);
    // every ordinary id decodes to text, and text made of them encodes back to the same ids
    const ids = [300, 5000, 150000, 151642];
    const text = tok.decode(ids);
    expect(text.length).toBeGreaterThan(0);
    expect(tok.encode(text)).toEqual(ids);
  } finally {
    tok.free();
  }
}, 30_000);
