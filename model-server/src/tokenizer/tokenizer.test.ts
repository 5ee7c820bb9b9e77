import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ModelLoadError } from "../loader/errors";
import { loadChatTemplate, renderChat } from "./chat-template";
import { loadTokenizer, tokenizerFromJson } from "./tokenizer";

const MODEL = join(import.meta.dir, "..", "..", "models", "tiny-wordnet-moe");
const CASES = join(import.meta.dir, "..", "..", "fixtures", "bundled", "tokenizer-cases.json");

test("encodes exactly as Hugging Face tokenizers does (cases recorded by train_bundled.py) and decodes back", () => {
  const tok = loadTokenizer(MODEL);
  const cases: { text: string; ids: number[] }[] = JSON.parse(readFileSync(CASES, "utf8"));
  for (const c of cases) {
    expect(tok.encode(c.text, { allowSpecial: true })).toEqual(c.ids);
    expect(tok.decode(c.ids)).toBe(c.text);
  }
  tok.free();
});

test("special tokens only when allowed; token bytes for streaming", () => {
  const tok = loadTokenizer(MODEL);
  const end = tok.specialTokens["<|im_end|>"]!;
  expect(end).toBe(4095);
  expect(tok.encode("<|im_end|>", { allowSpecial: true })).toEqual([end]);
  expect(tok.encode("<|im_end|>")).not.toContain(end);
  const ids = tok.encode("café");
  const bytes = ids.flatMap((id) => Array.from(tok.tokenBytes(id)));
  expect(new TextDecoder().decode(Uint8Array.from(bytes))).toBe("café");
  expect(tok.spec.ranks.split("\n")[0]).toMatch(/^\S+ \d+$/);
  tok.free();
});

test("chat template renders ChatML with the generation prompt", () => {
  const chat = loadChatTemplate(MODEL);
  expect(chat.eosToken).toBe("<|im_end|>");
  expect(renderChat(chat, [{ role: "user", content: "hi" }], true)).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
});

const bpe = (over: Record<string, unknown>) => {
  const json = JSON.parse(readFileSync(join(MODEL, "tokenizer.json"), "utf8"));
  return { ...json, ...over, model: { ...json.model, ...((over.model as object) ?? {}) } };
};

test("tokenizers tiktoken cannot represent are refused at load time, saying why", () => {
  const refuse = (json: Record<string, unknown>, why: RegExp) => {
    try {
      tokenizerFromJson(json);
      throw new Error("accepted");
    } catch (e) {
      expect(e).toBeInstanceOf(ModelLoadError);
      expect((e as ModelLoadError).code).toBe("unsupported_tokenizer");
      expect((e as Error).message).toMatch(why);
    }
  };
  refuse(bpe({ model: { type: "WordPiece" } }), /model type WordPiece/);
  refuse(bpe({ model: { byte_fallback: true } }), /byte_fallback/);
  refuse(bpe({ normalizer: { type: "Lowercase" } }), /normalizer Lowercase/);
  refuse(bpe({ pre_tokenizer: { type: "Metaspace" } }), /pre_tokenizer Metaspace/);
  const json = bpe({});
  const merges = [...json.model.merges];
  [merges[10], merges[500]] = [merges[500], merges[10]];
  refuse({ ...json, model: { ...json.model, merges } }, /merge order and ids disagree/);
});

test("Split + ByteLevel pre-tokenizers (Qwen/Llama-3 style) take the Split regex", () => {
  const pattern = "(?i:'s|'t)|\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+|\\s+";
  const tok = tokenizerFromJson(bpe({ pre_tokenizer: { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: pattern }, behavior: "Isolated", invert: false }, { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false }] } }));
  expect(tok.spec.pattern).toBe(pattern);
  expect(tok.decode(tok.encode("It's 42 dogs"))).toBe("It's 42 dogs");
  tok.free();
});

test("added tokens marked special: false (Qwen's <tool_call>, <think>) are whole tokens and text, not control", () => {
  const json = bpe({});
  const added = [...json.added_tokens, { id: 4096, content: "<tool_call>", special: false }, { id: 4097, content: "<think>" }];
  const tok = tokenizerFromJson({ ...json, added_tokens: added });
  expect(tok.spec.textTokenIds).toEqual([4096, 4097]);
  expect(tok.encode("a<tool_call>b", { allowSpecial: true })).toContain(4096);
  expect(new TextDecoder().decode(tok.tokenBytes(4096))).toBe("<tool_call>");
  // the bundled tokenizer's own added tokens are all control tokens
  expect(tokenizerFromJson(bpe({})).spec.textTokenIds).toEqual([]);
  tok.free();
});
