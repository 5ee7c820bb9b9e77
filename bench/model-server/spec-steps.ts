/**
 * How much prompt-lookup speculative decoding saves on a model, in engine
 * steps (load-independent) and in wall time (noisy on a shared machine): the
 * engine in process over the real runner, one greedy stream at a time, chat
 * prompts rendered with the model's own template and tokenizer.
 *
 *   bun bench/model-server/spec-steps.ts [--model DIR] [--tokens 128] [--k 0,2,4,8] [--ignore-eos]
 */
import { Template } from "@huggingface/jinja";
import { Tiktoken } from "tiktoken";
import { join } from "node:path";
import { createEngine } from "../../model-server/src/engine/engine";
import { loadServedModel } from "../../model-server/src/rpc/load-model";

const argv = process.argv.slice(2);
const flag = (name: string, dflt: string) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : dflt;
};
const dir = flag("--model", join(import.meta.dir, "..", "..", "model-server", "models", "tiny-wordnet-moe"));
const maxTokens = Number(flag("--tokens", "128"));
const ks = flag("--k", "0,2,4,8").split(",").map(Number);
const ignoreEos = argv.includes("--ignore-eos");

const QUESTIONS = ["What does river mean?", "What is a telescope?", "Define the verb whisper.", "What is music?", "What does brave mean?", "What is a harbor?", "Define the noun lantern.", "What does it mean to borrow?"];

const m = await loadServedModel(dir, { backend: "cpu" });
const tk = new Tiktoken(new TextDecoder().decode(m.meta.tokenizer.ranks), m.meta.tokenizer.specialTokens, m.meta.tokenizer.pattern);
const template = new Template(m.meta.chatTemplate);
const prompts = QUESTIONS.map((q) =>
  Array.from(tk.encode(template.render({ messages: [{ role: "user", content: q }], add_generation_prompt: true, bos_token: m.meta.bosToken, eos_token: m.meta.eosToken }), "all")),
);
const forward = m.runner.forward.bind(m.runner);
let steps = 0;
m.runner.forward = (s) => {
  steps++;
  return forward(s);
};

console.log(`# ${m.runner.spec.modelId}: ${QUESTIONS.length} chat prompts, greedy, max ${maxTokens} tokens${ignoreEos ? ", ignore_eos" : ""}, one stream at a time`);
console.log("| spec tokens k | generated | engine steps | tokens per step | tokens/s (wall) |");
console.log("| --- | --- | --- | --- | --- |");
for (const k of ks) {
  const engine = createEngine({ runner: m.runner, blockSize: 16, numKvBlocks: 512, maxNumSeqs: 1, maxBatchTokens: 256, maxQueue: 8, serverId: "bench", specTokens: k });
  let generated = 0;
  steps = 0;
  const t0 = performance.now();
  for (const p of prompts) {
    for await (const o of engine.generate({ promptTokenIds: p, stop: { maxTokens, ignoreEos } })) generated += o.tokenIds.length;
  }
  const secs = (performance.now() - t0) / 1000;
  console.log(`| ${k} | ${generated} | ${steps} | ${(generated / steps).toFixed(2)} | ${(generated / secs).toFixed(0)} |`);
  await engine.close();
}
tk.free();
m.runner.close();
