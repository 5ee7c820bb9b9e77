/**
 * Token id -> bytes, built from a tokenizer in tiktoken form (the ranks file
 * GetModelInfo serves: one "base64(bytes) rank" per line, rank = token id) and
 * its special tokens. The detokenizer streams these bytes into text.
 *
 * @example
 * const bytesOf = tokenBytesFromRanks(ranksFile, { "<|im_end|>": 4095 });
 * bytesOf(72); // Uint8Array [ 72 ] for a byte-level vocabulary
 */
import type { TokenBytes } from "./detokenizer";

export function tokenBytesFromRanks(ranks: Uint8Array | string, specialTokens: Record<string, number>): TokenBytes {
  const text = typeof ranks === "string" ? ranks : new TextDecoder().decode(ranks);
  const table: Uint8Array[] = [];
  for (const line of text.split("\n")) {
    if (line.length === 0) continue;
    const sp = line.lastIndexOf(" ");
    if (sp <= 0) throw new Error(`ranks file: malformed line "${line.slice(0, 40)}"`);
    const rank = Number(line.slice(sp + 1));
    if (!Number.isInteger(rank) || rank < 0) throw new Error(`ranks file: bad rank in "${line.slice(0, 40)}"`);
    table[rank] = Uint8Array.from(Buffer.from(line.slice(0, sp), "base64"));
  }
  const enc = new TextEncoder();
  for (const [name, id] of Object.entries(specialTokens)) table[id] = enc.encode(name);
  const empty = new Uint8Array(0);
  // An id with no bytes (a hole in the vocabulary) shows as nothing rather than failing a stream.
  return (id) => table[id] ?? empty;
}
