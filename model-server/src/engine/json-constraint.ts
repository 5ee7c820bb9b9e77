/**
 * JSON mode (OpenAI's `response_format` `json_object`, or `json_schema` with a schema json-schema.ts compiles): at
 * each step, the token ids whose bytes keep the output a prefix of one JSON object (of the schema; json-state.ts), as
 * a mask the sampler applies; once the object is whole the
 * sequence ends ("stop"), so it needs no EOS. Special tokens (EOS, stop ids, anything without bytes) are never
 * allowed. Tokens are tried from the state by their bytes, but only where they can matter: inside a string every
 * token without `"`, `\` or a control byte continues it (one precomputed mask), and elsewhere only tokens whose
 * first byte may come next are tried. Masks are cached per state (a string's mask is the same at every position).
 *
 * @example
 * const vocab = createJsonVocab(V, tokenBytes, [eos]);
 * const c = vocab.constraint();
 * c.allowed();   // Uint8Array(V): 1 where the token may come next
 * c.accept(id);  // after the sampler chose id
 * c.complete;    // the object is whole: stop
 */
import { mapFront } from "@dispatch/common/src/map-front";
import { ANY_OBJECT, type SchemaNode } from "./json-schema";
import { inPlainString, jsonStart, stateKey, stepJson, stepJsonBytes, type JsonState } from "./json-state";

/** A per-sequence constraint on the next token (engine/sampler.ts applies `allowed`). */
export interface TokenConstraint {
  /** 1 where the token may come next, over the vocabulary (do not modify). */
  allowed(): Uint8Array;
  /** Advance past the chosen token. A token the mask did not allow breaks the constraint (failed). */
  accept(token: number): void;
  /** The output is whole: the sequence should stop. */
  readonly complete: boolean;
  /**
   * A token the mask did not allow came (the mask was empty: no token of the vocabulary continues the output, as
   * with a vocabulary that lacks some byte): the sequence cannot go on as asked and should end with an error.
   */
  readonly failed: boolean;
}

export interface JsonVocab {
  /** A constraint to one JSON object of `root` (json-schema.ts; default: any object), with literal text around it. */
  constraint(root?: SchemaNode, frame?: { prefix?: string; suffix?: string; thinking?: "may" | "inside" }): TokenConstraint;
}

/** Masks kept per vocabulary (by state): strings at a few depths, structure around them. */
const MASK_CACHE = 256;

/** `onMask`: told the seconds each mask not found in the cache took to compute (metrics). */
export function createJsonVocab(vocabSize: number, tokenBytes: (id: number) => Uint8Array, special: readonly number[], onMask?: (seconds: number) => void): JsonVocab {
  const bytes: (Uint8Array | null)[] = new Array(vocabSize);
  const excluded = new Set(special);
  const plain = new Uint8Array(vocabSize); // continues any string
  const notPlain: number[] = []; // candidates inside a string that need a try
  const singles: number[][] = Array.from({ length: 256 }, () => []);
  const byTwo = new Map<number, number[]>(); // longer tokens by their first two bytes
  for (let id = 0; id < vocabSize; id++) {
    const b = excluded.has(id) ? null : tokenBytes(id);
    if (!b || b.length === 0) {
      bytes[id] = null;
      continue;
    }
    bytes[id] = b;
    if (b.length === 1) {
      singles[b[0]!]!.push(id);
    } else {
      const k = b[0]! * 256 + b[1]!;
      let list = byTwo.get(k);
      if (!list) byTwo.set(k, (list = []));
      list.push(id);
    }
    let ok = true;
    for (let i = 0; i < b.length && ok; i++) ok = b[i]! >= 0x20 && b[i] !== 0x22 && b[i] !== 0x5c;
    if (ok) plain[id] = 1;
    else notPlain.push(id);
  }
  const cache = new Map<string, Uint8Array>(); // LRU: a hit moves to the end
  const oldest = mapFront(cache);

  function maskFor(s: JsonState): Uint8Array {
    const key = stateKey(s);
    const hit = cache.get(key);
    if (hit) {
      cache.delete(key);
      cache.set(key, hit);
      return hit;
    }
    const t0 = performance.now();
    let mask: Uint8Array;
    if (inPlainString(s)) {
      mask = plain.slice();
      for (const id of notPlain) if (stepJsonBytes(s, bytes[id]!)) mask[id] = 1;
    } else {
      // outside strings few bytes may come next: try the first byte, then the second, then only the tokens that
      // start with a pair that passed
      mask = new Uint8Array(vocabSize);
      for (let b1 = 0; b1 < 256; b1++) {
        const after1 = stepJson(s, b1);
        if (!after1) continue;
        for (const id of singles[b1]!) mask[id] = 1;
        for (let b2 = 0; b2 < 256; b2++) {
          const list = byTwo.get(b1 * 256 + b2);
          if (!list) continue;
          const after2 = stepJson(after1, b2);
          if (!after2) continue;
          for (const id of list) {
            const b = bytes[id]!;
            if (b.length === 2 || stepJsonBytes(after2, b.subarray(2))) mask[id] = 1;
          }
        }
      }
    }
    cache.set(key, mask);
    if (cache.size > MASK_CACHE) oldest.shift();
    onMask?.((performance.now() - t0) / 1000);
    return mask;
  }

  return {
    constraint(root = ANY_OBJECT, frame = {}) {
      let state: JsonState | null = jsonStart(root, frame);
      return {
        allowed: () => (state ? maskFor(state) : new Uint8Array(vocabSize)),
        accept(token) {
          const b = token >= 0 && token < vocabSize ? bytes[token] : null;
          state = state && b ? stepJsonBytes(state, b) : null;
        },
        get complete() {
          return state !== null && state.done;
        },
        get failed() {
          return state === null;
        },
      };
    },
  };
}
