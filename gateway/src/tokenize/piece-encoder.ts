/**
 * tiktoken's `encode(text, "all")` with the pre-tokenizer split done by JS's
 * own regex engine and each piece's tokens cached, so a prompt of words seen
 * before costs a regex pass and map lookups instead of a WASM call that splits
 * and merges everything again (512 common words: ~230 us -> ~70 us on the
 * 2-core box; docs/gateway-bench.md, 2026-11-30).
 *
 * The result is tiktoken's, token for token, because it is tiktoken's own
 * procedure: the text is cut at special tokens, each ordinary segment is split
 * by the pattern (leftmost-first, as fancy_regex does) and each piece is
 * byte-pair encoded on its own (here: `encodeOrdinary(piece)`, cached). Only
 * segments of ASCII text take this path, where the pattern's classes (`\s`,
 * `\p{L}`, `\p{N}`) mean the same in both engines; any other segment, a
 * pattern JS cannot compile (possessive quantifiers) and special tokens that
 * are prefixes of one another go to tiktoken whole. A segment that misses the
 * cache too often hands its rest to tiktoken (a split restarted at a piece
 * boundary is the same split: the patterns look ahead, never behind). A piece
 * cut coarser than fancy_regex would cut it still comes out right, since
 * encode_ordinary splits it again; the differential test would catch a finer cut.
 *
 * @example
 * const encode = createPieceEncoder({ pattern, specialTokens, encodeOrdinary: (s) => tk.encode_ordinary(s) }) ?? ((s) => tk.encode(s, "all"));
 * encode("<|im_start|>user\nhello there<|im_end|>");
 */
export interface PieceEncoderOptions {
  pattern: string;
  specialTokens: Record<string, number>;
  /** tiktoken's encode_ordinary (no special tokens). */
  encodeOrdinary(text: string): Uint32Array;
  /** Pieces kept (the cache is emptied when full). */
  maxPieces?: number;
  /** Misses in one segment before its rest goes to tiktoken whole. */
  maxMisses?: number;
}

const NON_ASCII = /[^\x00-\x7f]/;
/** Longest piece kept in the cache, characters. */
const MAX_PIECE = 64;
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The encoder, or undefined when this pattern or these special tokens cannot take the fast path. */
export function createPieceEncoder(o: PieceEncoderOptions): ((text: string) => Uint32Array) | undefined {
  let split: RegExp;
  try {
    split = new RegExp(o.pattern, "gu");
  } catch {
    return undefined; // e.g. possessive quantifiers (cl100k): tiktoken only
  }
  const specials = Object.keys(o.specialTokens);
  if (specials.some((a) => a === "" || specials.some((b) => a !== b && b.startsWith(a)))) return undefined;
  const specialRe = specials.length ? new RegExp(specials.map(escapeRe).join("|"), "g") : null;
  const maxPieces = o.maxPieces ?? 65_536;
  const maxMisses = o.maxMisses ?? 64;
  const cache = new Map<string, Uint32Array>();

  /** Appends the tokens of one ordinary segment. */
  function segment(seg: string, out: number[]): void {
    if (seg === "") return;
    if (NON_ASCII.test(seg)) {
      for (const id of o.encodeOrdinary(seg)) out.push(id);
      return;
    }
    let misses = 0;
    split.lastIndex = 0;
    for (let m = split.exec(seg); m !== null; m = split.exec(seg)) {
      const piece = m[0];
      if (piece === "") {
        // Never in tiktoken's patterns; no guessing how fancy_regex would step past it.
        for (const id of o.encodeOrdinary(seg.slice(m.index))) out.push(id);
        return;
      }
      let ids = cache.get(piece);
      if (ids === undefined) {
        if (++misses > maxMisses) {
          for (const id of o.encodeOrdinary(seg.slice(m.index))) out.push(id);
          return;
        }
        ids = o.encodeOrdinary(piece);
        // Long pieces are not kept: the cache stays within maxPieces x MAX_PIECE characters.
        if (piece.length <= MAX_PIECE) {
          if (cache.size >= maxPieces) cache.clear();
          cache.set(piece, ids);
        }
      }
      for (let i = 0; i < ids.length; i++) out.push(ids[i]!);
    }
  }

  return (text) => {
    const out: number[] = [];
    if (specialRe) {
      specialRe.lastIndex = 0;
      let start = 0;
      for (let m = specialRe.exec(text); m !== null; m = specialRe.exec(text)) {
        segment(text.slice(start, m.index), out);
        out.push(o.specialTokens[m[0]]!);
        start = m.index + m[0].length;
      }
      segment(text.slice(start), out);
    } else segment(text, out);
    return Uint32Array.from(out);
  };
}
