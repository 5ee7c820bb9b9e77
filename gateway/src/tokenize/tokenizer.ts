/**
 * A byte-level BPE tokenizer built from the Tokenizer message a model server
 * returns in GetModelInfo (tiktoken ranks, pattern, special tokens), so the
 * gateway and the engine tokenize identically. Token bytes are cached per id
 * for streaming detokenization; special tokens detokenize to nothing (like
 * Hugging Face's `skip_special_tokens=True`), except those that are text
 * (`textTokenIds`, Hugging Face's `"special": false`, e.g. Qwen's `<tool_call>`),
 * which detokenize to their text as Hugging Face's decode shows them.
 *
 * @example
 * const tok = createTokenizer({ ranks, pattern, specialTokens: { "<|im_end|>": 100 } });
 * tok.encode("hello"); // Uint32Array
 */
import { Tiktoken } from "tiktoken";
import { createPieceEncoder } from "./piece-encoder";

/** `DISPATCH_TOKENIZE_CACHE=0`: every prompt through tiktoken whole (no JS split, no piece cache). */
const piecesOn = process.env.DISPATCH_TOKENIZE_CACHE !== "0";

export interface TokenizerSpec {
  /** tiktoken ranks file: one "base64(bytes) rank" per line. */
  ranks: string;
  pattern: string;
  specialTokens: Record<string, number>;
  /** Of specialTokens, the ids that are text (shown in output), not control. */
  textTokenIds?: readonly number[];
}

export interface Tokenizer {
  /** Encode text; special-token text in it becomes special tokens (as HF tokenizers do). */
  encode(text: string): Uint32Array;
  /**
   * The bytes a token stands for; empty for (control) special tokens and for ids the
   * tokenizer does not have (a model's vocabulary is often padded past its
   * tokenizer's: such an id shows as nothing, as the model server shows it,
   * rather than failing the stream).
   */
  tokenBytes(id: number): Uint8Array;
  /** The text of token ids: their bytes (as tokenBytes gives them) decoded as UTF-8. */
  decode(ids: ArrayLike<number>): string;
  isSpecial(id: number): boolean;
  /** Id of a special token by its text, if it has one. */
  specialId(text: string): number | undefined;
  readonly vocabSize: number;
}

const EMPTY = new Uint8Array(0);

export function createTokenizer(spec: TokenizerSpec): Tokenizer {
  const tk = new Tiktoken(spec.ranks, spec.specialTokens, spec.pattern);
  const specialIds = new Set(Object.values(spec.specialTokens));
  const textIds = new Set(spec.textTokenIds ?? []);
  const textBytes = new Map(Object.entries(spec.specialTokens).filter(([, id]) => textIds.has(id)).map(([t, id]) => [id, new TextEncoder().encode(t)]));
  let vocabSize = 0;
  for (let i = spec.ranks.length - 1; i > 0; i--) if (spec.ranks.charCodeAt(i) === 10) vocabSize++;
  if (!spec.ranks.endsWith("\n")) vocabSize++;
  for (const id of specialIds) vocabSize = Math.max(vocabSize, id + 1);
  const bytesCache: (Uint8Array | undefined)[] = [];
  /** A hole below vocabSize (no rank, not special) makes tiktoken throw: it is empty too. */
  const decodeOrEmpty = (id: number): Uint8Array => {
    try {
      return tk.decode_single_token_bytes(id);
    } catch {
      return EMPTY;
    }
  };
  const encodeAll = (text: string) => tk.encode(text, "all");
  const pieces = piecesOn
    ? createPieceEncoder({ pattern: spec.pattern, specialTokens: spec.specialTokens, encodeOrdinary: (s) => tk.encode_ordinary(s) })
    : undefined;
  const tokenBytes = (id: number): Uint8Array => {
    let b = bytesCache[id];
    if (b === undefined) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) return EMPTY; // not cached: ids are unbounded
      b = textIds.has(id) ? textBytes.get(id)! : specialIds.has(id) ? EMPTY : decodeOrEmpty(id);
      bytesCache[id] = b;
    }
    return b;
  };
  return {
    encode: pieces ?? encodeAll,
    tokenBytes,
    decode(ids) {
      const parts: Uint8Array[] = [];
      let n = 0;
      for (let i = 0; i < ids.length; i++) {
        const b = tokenBytes(ids[i]!);
        parts.push(b);
        n += b.length;
      }
      const all = new Uint8Array(n);
      let at = 0;
      for (const b of parts) all.set(b, at), (at += b.length);
      return new TextDecoder().decode(all);
    },
    isSpecial: (id) => specialIds.has(id),
    specialId: (text) => spec.specialTokens[text],
    vocabSize,
  };
}
