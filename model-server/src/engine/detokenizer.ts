/**
 * Incremental detokenization for text deltas. Byte-level BPE tokens are byte
 * strings, and one UTF-8 character can span several tokens: the streaming
 * TextDecoder holds back the bytes of an incomplete character until the token
 * that completes it arrives, so a delta never carries half a character.
 *
 * @example
 * const d = createDetokenizer((id) => vocabBytes[id]);
 * d.push([0xe2_token]);  // "" (first byte of "€" held back)
 * d.push([more]);        // "€"
 * d.flush();             // whatever is left, invalid bytes as U+FFFD
 */
export type TokenBytes = (tokenId: number) => Uint8Array;

export interface Detokenizer {
  /** Text completed by these tokens. */
  push(tokenIds: readonly number[]): string;
  /** End of stream: bytes still held back, decoded with replacement characters. */
  flush(): string;
}

export function createDetokenizer(tokenBytes: TokenBytes): Detokenizer {
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  return {
    push(tokenIds) {
      let out = "";
      for (const id of tokenIds) out += decoder.decode(tokenBytes(id), { stream: true });
      return out;
    },
    flush() {
      return decoder.decode();
    },
  };
}
