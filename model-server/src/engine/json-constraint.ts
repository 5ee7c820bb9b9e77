/**
 * JSON mode (OpenAI's `response_format` `json_object`, or `json_schema` with a schema json-schema.ts compiles): at
 * each step, the token ids whose bytes keep the output a prefix of one JSON object (of the schema; json-state.ts), as
 * a mask the sampler applies; once the object is whole the
 * sequence ends ("stop"), so it needs no EOS. Special tokens (EOS, stop ids, anything without bytes) are never
 * allowed. Tokens are tried from the state by their bytes, but only where they can matter: inside a string every
 * token without `"`, `\` or a control byte continues it (one precomputed mask); elsewhere the vocabulary is walked
 * in byte order, each state stepped once per shared prefix and every token under a prefix that cannot come skipped
 * at once (a trie walk over the sorted tokens). Masks are cached per state (a string's mask is the same at every
 * position).
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
  const order: number[] = []; // the tokens with bytes, sorted by them
  for (let id = 0; id < vocabSize; id++) {
    const b = excluded.has(id) ? null : tokenBytes(id);
    if (!b || b.length === 0) {
      bytes[id] = null;
      continue;
    }
    bytes[id] = b;
    order.push(id);
    let ok = true;
    for (let i = 0; i < b.length && ok; i++) ok = b[i]! >= 0x20 && b[i] !== 0x22 && b[i] !== 0x5c;
    if (ok) plain[id] = 1;
    else notPlain.push(id);
  }
  const all = sortedTokens(order, bytes);
  const strings = sortedTokens(notPlain, bytes); // inside a string: only these need a try

  /**
   * Every token the state accepts, by a walk over the sorted vocabulary: `stack[d]` is the state after the current
   * token's first d bytes, kept for the next token as far as they share bytes; a byte that cannot come at depth d
   * rules out every following token with the same first d + 1 bytes, skipped without a step.
   */
  function walk(s: JsonState, mask: Uint8Array, { order, lcp }: SortedTokens): void {
    const stack: JsonState[] = [s];
    for (let i = 0; i < order.length; ) {
      const id = order[i]!;
      const b = bytes[id]!;
      let d = lcp[i]!;
      let st = stack[d]!;
      let dead = -1;
      for (; d < b.length; d++) {
        const next = stepJson(st, b[d]!);
        if (!next) {
          dead = d;
          break;
        }
        stack[d + 1] = st = next;
      }
      i++;
      if (dead < 0) mask[id] = 1;
      else while (i < order.length && lcp[i]! > dead) i++;
    }
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
      walk(s, mask, strings);
    } else {
      mask = new Uint8Array(vocabSize);
      walk(s, mask, all);
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

/** Token ids sorted by their bytes, and `lcp[i]`: the bytes order[i] shares with order[i - 1]. */
interface SortedTokens {
  order: number[];
  lcp: Uint16Array;
}

function sortedTokens(ids: readonly number[], bytes: readonly (Uint8Array | null)[]): SortedTokens {
  const order = [...ids].sort((x, y) => compareBytes(bytes[x]!, bytes[y]!));
  const lcp = new Uint16Array(order.length);
  for (let i = 1; i < order.length; i++) lcp[i] = commonPrefix(bytes[order[i - 1]!]!, bytes[order[i]!]!);
  return { order, lcp };
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

function commonPrefix(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length, 0xffff);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
