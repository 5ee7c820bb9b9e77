/**
 * A model directory's tokenizer, run by tiktoken (WASM): `tokenizer.json`
 * converted to tiktoken ranks at load time (hf-to-tiktoken.ts). Also exposes
 * the tiktoken form itself, which GetModelInfo hands to the gateway so both
 * sides tokenize identically.
 *
 * @example
 *   const tok = loadTokenizer("model-server/models/tiny-wordnet-moe");
 *   const ids = tok.encode("<|im_start|>user\nhi<|im_end|>\n", { allowSpecial: true });
 *   tok.decode(ids); // the same text
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tiktoken } from "tiktoken";
import { ModelLoadError } from "../loader/errors";
import { hfToTiktoken, type TiktokenSpec } from "./hf-to-tiktoken";

export interface Tokenizer {
  /** tiktoken form: pattern, ranks file text, special tokens. */
  readonly spec: TiktokenSpec;
  readonly vocabSize: number;
  /** Special tokens (e.g. "<|im_end|>") by text. */
  readonly specialTokens: Record<string, number>;
  /** allowSpecial: text like "<|im_start|>" becomes its special token (chat templates); otherwise plain text. */
  encode(text: string, o?: { allowSpecial?: boolean }): number[];
  /** Lossy UTF-8 decode (invalid sequences become U+FFFD). */
  decode(ids: ArrayLike<number>): string;
  /** The exact bytes of one token (for incremental detokenization). */
  tokenBytes(id: number): Uint8Array;
  free(): void;
}

export function tokenizerFromJson(json: Record<string, unknown>): Tokenizer {
  const spec = hfToTiktoken(json);
  let enc: Tiktoken;
  try {
    enc = new Tiktoken(spec.ranks, spec.specialTokens, spec.pattern);
  } catch (e) {
    throw new ModelLoadError("unsupported_tokenizer", `tiktoken refused the converted tokenizer: ${e instanceof Error ? e.message : String(e)}`);
  }
  const normalize = (s: string) => (spec.normalization === "NFC" ? s.normalize("NFC") : s);
  const decoder = new TextDecoder("utf-8", { fatal: false });
  return {
    spec,
    vocabSize: spec.vocabSize,
    specialTokens: spec.specialTokens,
    encode(text, o) {
      const s = normalize(text);
      return Array.from(o?.allowSpecial ? enc.encode(s, "all") : enc.encode_ordinary(s));
    },
    decode(ids) {
      const parts: Uint8Array[] = [];
      let n = 0;
      for (let i = 0; i < ids.length; i++) {
        const b = spec.tokenBytes[ids[i]!] ?? new Uint8Array(0);
        parts.push(b);
        n += b.length;
      }
      const all = new Uint8Array(n);
      let at = 0;
      for (const p of parts) {
        all.set(p, at);
        at += p.length;
      }
      return decoder.decode(all);
    },
    tokenBytes(id) {
      const b = spec.tokenBytes[id];
      if (b === undefined) throw new RangeError(`token id ${id} outside the vocabulary`);
      return b;
    },
    free: () => enc.free(),
  };
}

export function loadTokenizer(dir: string): Tokenizer {
  const file = join(dir, "tokenizer.json");
  if (!existsSync(file)) throw new ModelLoadError("missing_file", `${file} not found (the model server needs a Hugging Face tokenizer.json)`);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    throw new ModelLoadError("bad_file", `${file} is not valid JSON`);
  }
  return tokenizerFromJson(json);
}
