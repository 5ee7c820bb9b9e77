/**
 * Hugging Face `tokenizer.json` (byte-level BPE) -> tiktoken form: a ranks
 * file ("base64(bytes) rank" per line, rank = token id), the pre-tokenizer
 * regex, and the special tokens. Pure: JSON in, data out.
 *
 * tiktoken merges the adjacent pair whose merged bytes have the lowest rank;
 * HF merges the pair listed first in `merges`. They agree when every merge's
 * result is a vocabulary token and results appear in increasing id order. Any
 * tokenizer where that (or anything else tiktoken cannot express: byte
 * fallback, word suffixes, a normalizer other than NFC, a pre-tokenizer other
 * than byte-level with a regex) does not hold is refused with a
 * ModelLoadError saying which part.
 *
 * @example
 *   const tk = hfToTiktoken(JSON.parse(readFileSync("tokenizer.json", "utf8")));
 *   new Tiktoken(tk.ranks, tk.specialTokens, tk.pattern);
 */
import { ModelLoadError } from "../loader/errors";

/** GPT-2's pre-tokenizer regex (HF ByteLevel with use_regex). */
export const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

export interface TiktokenSpec {
  pattern: string;
  /** tiktoken's ranks file text. */
  ranks: string;
  specialTokens: Record<string, number>;
  /**
   * Added tokens that are not special (Hugging Face's `"special": false`, e.g. Qwen's `<tool_call>`, `<think>`):
   * whole tokens when encoding, like the special ones, but part of the text when decoding.
   */
  textTokenIds: number[];
  /** Unicode normalization applied before encoding ("NFC"), or null. */
  normalization: "NFC" | null;
  /** Bytes of every ordinary token, by id (special ids hold their UTF-8 text). */
  tokenBytes: Uint8Array[];
  vocabSize: number;
}

type Json = Record<string, any>;

const fail = (msg: string): never => {
  throw new ModelLoadError("unsupported_tokenizer", `tokenizer.json: ${msg}`);
};

/** GPT-2's byte <-> printable-unicode table used by byte-level BPE vocabularies. */
export function byteLevelDecoder(): Map<string, number> {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const map = new Map<string, number>();
  bs.forEach((b, i) => map.set(String.fromCharCode(cs[i]!), b));
  return map;
}

function pattern(pre: Json | null): string {
  if (!pre) fail("no pre_tokenizer (byte-level BPE needs one)");
  if (pre!.type === "ByteLevel") {
    if (pre!.add_prefix_space) fail("ByteLevel add_prefix_space=true is not supported");
    if (pre!.use_regex === false) fail("ByteLevel without a regex splits nothing; not supported");
    return GPT2_PATTERN;
  }
  if (pre!.type === "Sequence") {
    const steps = pre!.pretokenizers as Json[];
    const split = steps.filter((s) => s.type === "Split");
    const byte = steps.filter((s) => s.type === "ByteLevel");
    if (steps.length !== 2 || split.length !== 1 || byte.length !== 1 || steps[1]!.type !== "ByteLevel") fail(`pre_tokenizer sequence [${steps.map((s) => s.type)}] is not supported (Split + ByteLevel)`);
    const s = split[0]!;
    if (s.behavior !== "Isolated" || s.invert) fail(`Split behavior ${s.behavior}${s.invert ? " inverted" : ""} is not supported (Isolated)`);
    if (byte[0]!.use_regex !== false) fail("ByteLevel after Split must have use_regex=false");
    if (byte[0]!.add_prefix_space) fail("ByteLevel add_prefix_space=true is not supported");
    const re = s.pattern?.Regex ?? null;
    if (typeof re !== "string") fail("Split pattern must be a regex");
    return re as string;
  }
  return fail(`pre_tokenizer ${pre!.type} is not supported (ByteLevel, or Split + ByteLevel)`);
}

export function hfToTiktoken(json: Json): TiktokenSpec {
  const model = json.model as Json | undefined;
  if (!model || model.type !== "BPE") fail(`model type ${model?.type} is not supported (BPE)`);
  if (model!.byte_fallback) fail("byte_fallback BPE (sentencepiece style) is not supported");
  if (model!.continuing_subword_prefix || model!.end_of_word_suffix) fail("subword prefixes/suffixes are not supported");
  let normalization: "NFC" | null = null;
  const norm = json.normalizer as Json | null;
  if (norm) {
    if (norm.type === "NFC") normalization = "NFC";
    else fail(`normalizer ${norm.type} is not supported (none or NFC)`);
  }
  const pat = pattern(json.pre_tokenizer ?? null);
  const decoder = byteLevelDecoder();
  const vocab = model!.vocab as Record<string, number>;
  const toBytes = (tok: string): Uint8Array => {
    const out = new Uint8Array(tok.length);
    let i = 0;
    for (const ch of tok) {
      const b = decoder.get(ch);
      if (b === undefined) fail(`vocabulary token ${JSON.stringify(tok)} is not byte-level (character ${JSON.stringify(ch)})`);
      out[i++] = b!;
    }
    return out.subarray(0, i);
  };

  const specialTokens: Record<string, number> = {};
  const textTokenIds: number[] = [];
  for (const t of (json.added_tokens ?? []) as Json[]) {
    specialTokens[t.content] = t.id;
    if (t.special !== true) textTokenIds.push(t.id);
  }
  const specialIds = new Set(Object.values(specialTokens));

  // Merge order must match id order for tiktoken's rank-based merging.
  const merges = (model!.merges ?? []) as (string | [string, string])[];
  const firstMergeId = new Set<number>();
  let lastId = -1;
  for (let i = 0; i < merges.length; i++) {
    const m = merges[i]!;
    const [a, b] = typeof m === "string" ? (m.split(" ") as [string, string]) : m;
    const id = vocab[a + b];
    if (id === undefined) fail(`merge ${i} (${JSON.stringify(a)} + ${JSON.stringify(b)}) produces no vocabulary token`);
    if (firstMergeId.has(id!)) continue;
    if (id! < lastId) fail(`merge ${i} produces token id ${id} after id ${lastId}: merge order and ids disagree, which tiktoken ranks cannot represent`);
    firstMergeId.add(id!);
    lastId = id!;
  }

  const lines: string[] = [];
  let maxId = -1;
  const byId: [number, Uint8Array][] = [];
  const seen = new Set<string>();
  for (const [tok, id] of Object.entries(vocab)) {
    if (specialIds.has(id)) continue;
    const bytes = toBytes(tok);
    const key = Buffer.from(bytes).toString("base64");
    if (seen.has(key)) fail(`two vocabulary tokens decode to the same bytes (${key})`);
    seen.add(key);
    if (bytes.length > 1 && !firstMergeId.has(id)) fail(`token ${JSON.stringify(tok)} (id ${id}) is not produced by any merge`);
    byId.push([id, bytes]);
    maxId = Math.max(maxId, id);
  }
  byId.sort((p, q) => p[0] - q[0]);
  for (const [id, bytes] of byId) lines.push(`${Buffer.from(bytes).toString("base64")} ${id}`);
  const singles = byId.filter(([, b]) => b.length === 1).length;
  if (singles < 256) fail(`only ${singles} of the 256 single-byte tokens are in the vocabulary`);

  for (const id of specialIds) maxId = Math.max(maxId, id);
  const tokenBytes: Uint8Array[] = new Array(maxId + 1).fill(new Uint8Array(0));
  for (const [id, bytes] of byId) tokenBytes[id] = bytes;
  for (const [text, id] of Object.entries(specialTokens)) tokenBytes[id] = new TextEncoder().encode(text);
  return { pattern: pat, ranks: lines.join("\n") + "\n", specialTokens, textTokenIds, normalization, tokenBytes, vocabSize: maxId + 1 };
}
