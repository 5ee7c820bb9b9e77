import { expect, test } from "bun:test";
import { join } from "node:path";
import { Tiktoken } from "tiktoken";
import { loadModel } from "./load-model";

const DIR = join(import.meta.dir, "..", "..", "models", "tiny-wordnet-moe");

test("loadModel reports the ModelInfo fields, and its tiktoken form encodes like the tokenizer", async () => {
  const m = await loadModel({ dir: DIR, worker: false });
  expect(m.info).toMatchObject({ modelId: "tiny-wordnet-moe", architecture: "qwen3_moe", eosToken: "<|im_end|>", eosTokenIds: [4095], maxContext: 1024, vocabSize: 4096, backend: "cpu" });
  expect(m.info.chatTemplate).toContain("<|im_start|>");
  expect(m.info.tokenizer.specialTokens).toEqual({ "<|endoftext|>": 4093, "<|im_start|>": 4094, "<|im_end|>": 4095 });
  // What the gateway would build from GetModelInfo:
  const gw = new Tiktoken(new TextDecoder().decode(m.info.tokenizer.ranks), m.info.tokenizer.specialTokens, m.info.tokenizer.pattern);
  const text = "<|im_start|>user\nWhat does \"serendipity\" mean? 42!<|im_end|>\n";
  expect(Array.from(gw.encode(text, "all"))).toEqual(m.tokenizer.encode(text, { allowSpecial: true }));
  gw.free();
  m.runner.close();
  m.tokenizer.free();
});

test("backend auto falls back to the CPU where no GPU is usable", async () => {
  const m = await loadModel({ dir: DIR, backend: "auto" });
  expect(["cpu", "cuda"]).toContain(m.runner.backend);
  expect(m.info.backend).toBe(m.runner.backend);
  m.runner.close();
  m.tokenizer.free();
});

test("int8 experts asked of the CPU backend: said once through onProgress, the model still loads", async () => {
  const said: string[] = [];
  const m = await loadModel({ dir: DIR, worker: false, backend: "cpu", int8Experts: true, onProgress: (s) => said.push(s) });
  expect(m.runner.backend).toBe("cpu");
  expect(said.filter((s) => s.includes("int8 experts need the CUDA backend"))).toHaveLength(1);
  m.runner.close();
  m.tokenizer.free();
});
