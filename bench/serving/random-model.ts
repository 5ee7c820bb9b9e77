/**
 * A model directory the server loads like a checkpoint, for serving benchmarks at real shapes
 * without real weights: config.json (the real shape), a synthetic byte-level BPE tokenizer.json
 * with one ordinary token per id below the real special tokens (every token decodes to letters,
 * so every streamed token carries text), tokenizer_config.json with a chat template, and
 * random-weights.json, which tells the CUDA runner to generate the weights on the GPU
 * (model/cuda-runner.ts) instead of reading safetensors. Nothing large is written.
 *
 *   bun bench/serving/random-model.ts qwen3-30b-a3b /tmp/qwen3-random [--zipf 1.0] [--int8]
 *
 * @example
 *   writeRandomModel("qwen3-30b-a3b", "/tmp/q3", { seed: 1 });
 *   // then: bun model-server/src/main.ts --model /tmp/q3 --backend cuda
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { byteLevelDecoder } from "../../model-server/src/tokenizer/hf-to-tiktoken";
import { SHAPE_SPECIALS, shapeConfigJson } from "./shapes";

export interface RandomModelOptions {
  seed?: number;
  /** Zipf-skewed expert load (router bias, selection only); 0 = uniform. */
  zipf?: number;
  int8Experts?: boolean;
}

const LETTERS = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"];

/** A byte-level BPE tokenizer.json with `ordinary` tokens (ids 0..ordinary-1) plus the specials. */
export function syntheticTokenizer(ordinary: number, specials: [number, string][]): Record<string, unknown> {
  const byteChar = new Map<number, string>();
  for (const [ch, b] of byteLevelDecoder()) byteChar.set(b, ch);
  const vocab: Record<string, number> = {};
  for (let b = 0; b < 256; b++) vocab[byteChar.get(b)!] = b;
  const merges: [string, string][] = [];
  let next = 256;
  const add = (a: string, b: string) => {
    if (next >= ordinary) return false;
    vocab[a + b] = next++;
    merges.push([a, b]);
    return true;
  };
  const space = byteChar.get(32)!; // "Ġ"
  // words of 2 and 3 letters, then the same with a leading space, in id order (merge order = id order)
  const pairs: string[] = [];
  for (const a of LETTERS) for (const b of LETTERS) if (add(a, b)) pairs.push(a + b);
  for (const p of pairs) for (const c of LETTERS) add(p, c);
  const spaced: string[] = [];
  for (const a of LETTERS) if (add(space, a)) spaced.push(space + a);
  const spacedPairs: string[] = [];
  for (const s of spaced) for (const b of LETTERS) if (add(s, b)) spacedPairs.push(s + b);
  for (const p of spacedPairs) for (const c of LETTERS) if (!add(p, c)) break;
  if (next < ordinary) throw new RangeError(`the synthetic scheme makes ${next} tokens, fewer than ${ordinary}`);
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: specials.map(([id, content]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
}

export function writeRandomModel(shape: string, dir: string, o: RandomModelOptions = {}): void {
  const config = shapeConfigJson(shape);
  const specials = SHAPE_SPECIALS[shape];
  if (!specials) throw new Error(`no special tokens known for shape "${shape}"`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 1));
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ eos_token_id: config.eos_token_id, bos_token_id: config.bos_token_id }));
  const ordinary = Math.min(...specials.map(([id]) => id));
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(syntheticTokenizer(ordinary, specials)));
  const eos = specials.find(([id]) => id === config.eos_token_id)?.[1] ?? specials.at(-1)![1];
  writeFileSync(
    join(dir, "tokenizer_config.json"),
    JSON.stringify({
      tokenizer_class: "PreTrainedTokenizerFast",
      bos_token: null,
      eos_token: eos,
      chat_template: "{% for message in messages %}{{ message['role'] + ': ' + message['content'] + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}",
    }),
  );
  writeFileSync(join(dir, "random-weights.json"), JSON.stringify({ seed: o.seed ?? 1, zipf: o.zipf ?? 0, int8Experts: o.int8Experts ?? false }));
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { seed: { type: "string", default: "1" }, zipf: { type: "string", default: "0" }, int8: { type: "boolean", default: false } } });
  const [shape, dir] = positionals;
  if (!shape || !dir) {
    console.error("usage: bun bench/serving/random-model.ts <shape> <dir> [--seed N] [--zipf S] [--int8]");
    process.exit(2);
  }
  writeRandomModel(shape, dir, { seed: Number(values.seed), zipf: Number(values.zipf), int8Experts: values.int8 });
  console.error(`[random-model] ${shape} -> ${dir} (weights are generated on the GPU when the server loads it)`);
}
