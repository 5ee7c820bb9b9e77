import { describe, expect, test } from "bun:test";
import { Tiktoken } from "tiktoken";
import { createPieceEncoder } from "./piece-encoder";

/** Byte tokens plus every prefix (2+ bytes) of some words with and without a leading space: real merges. */
function ranks(): string {
  const lines: string[] = [];
  for (let b = 0; b < 256; b++) lines.push(`${Buffer.from([b]).toString("base64")} ${b}`);
  const seen = new Set<string>();
  const words = "the of and to in is was for on that with as by at from it's don't hello world token 2024 12 ! .. ?! ' \n\n  ".split(" ");
  for (const w of words.flatMap((w) => [w, ` ${w}`, w.toUpperCase()])) {
    for (let n = 2; n <= w.length; n++) {
      const p = w.slice(0, n);
      if (seen.has(p)) continue;
      seen.add(p);
      lines.push(`${Buffer.from(p).toString("base64")} ${256 + seen.size - 1}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

const RANKS = ranks();
const N_RANKS = RANKS.split("\n").length - 1;
const SPECIALS = { "<|endoftext|>": N_RANKS, "<|im_start|>": N_RANKS + 1, "<|im_end|>": N_RANKS + 2 };
const PATTERNS = {
  gpt2: String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
  qwen2: String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
};
const ALPHABET = ["x".repeat(70), " ".repeat(80), "the", " of", "and", " to", "It's", "DON'T", "'ll", "hello", " world", "x", "Q", "7", "2024", " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", ".", "!?", ",", "'", "-", "é", "日本", "😀", " ü", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im", "|>"];

function randomTexts(n: number, seed: number): string[] {
  let s = seed;
  const rand = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32);
  return Array.from({ length: n }, () => Array.from({ length: Math.floor(rand() * 60) }, () => ALPHABET[Math.floor(rand() * ALPHABET.length)]!).join(""));
}

describe("createPieceEncoder", () => {
  for (const [name, pattern] of Object.entries(PATTERNS)) {
    test(`${name}: token for token tiktoken's encode(text, "all") on 3,000 random texts, cache cold and warm`, () => {
      const tk = new Tiktoken(RANKS, SPECIALS, pattern);
      // A tiny cache and miss budget too, so the clear and the hand-over paths run.
      for (const opts of [{}, { maxPieces: 8, maxMisses: 3 }]) {
        const encode = createPieceEncoder({ pattern, specialTokens: SPECIALS, encodeOrdinary: (t) => tk.encode_ordinary(t), ...opts })!;
        expect(encode).toBeDefined();
        for (const round of [1, 2]) {
          for (const text of randomTexts(1500, round)) expect([...encode(text)]).toEqual([...tk.encode(text, "all")]);
        }
      }
      tk.free();
    });
  }

  test("a pattern JS cannot compile, or special tokens that prefix one another, take no fast path", () => {
    const opts = { specialTokens: SPECIALS, encodeOrdinary: () => new Uint32Array(0) };
    expect(createPieceEncoder({ ...opts, pattern: String.raw` ?\p{L}++|\s+` })).toBeUndefined();
    expect(createPieceEncoder({ ...opts, pattern: PATTERNS.gpt2, specialTokens: { "<|a|>": 1, "<|a|>b": 2 } })).toBeUndefined();
  });

  test("a prompt of words seen before goes to tiktoken not at all", () => {
    const tk = new Tiktoken(RANKS, SPECIALS, PATTERNS.qwen2);
    let calls = 0;
    const encode = createPieceEncoder({ pattern: PATTERNS.qwen2, specialTokens: SPECIALS, encodeOrdinary: (t) => (calls++, tk.encode_ordinary(t)) })!;
    const text = "<|im_start|>user\nthe world and the token of it's world<|im_end|>\n";
    expect([...encode(text)]).toEqual([...tk.encode(text, "all")]);
    const first = calls;
    expect(first).toBeGreaterThan(0);
    expect([...encode(text)]).toEqual([...tk.encode(text, "all")]);
    expect(calls).toBe(first);
    tk.free();
  });
});
