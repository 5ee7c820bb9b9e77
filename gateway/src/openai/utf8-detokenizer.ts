/**
 * Turns streamed token ids into text without ever emitting half a character:
 * token bytes go through one streaming TextDecoder, which keeps the bytes of
 * an incomplete UTF-8 sequence until the token that completes it arrives.
 *
 * @example
 * const d = createUtf8Detokenizer((id) => tokenizer.tokenBytes(id));
 * d.push([1234]); // "" while a multi-byte character is incomplete
 * d.push([1235]); // "é"
 */
export interface Utf8Detokenizer {
  push(tokenIds: ArrayLike<number>): string;
  /** End of stream: an incomplete trailing sequence becomes U+FFFD. */
  flush(): string;
}

/** `tokenBytes` returns a token's bytes (empty for special tokens that are not shown). */
export function createUtf8Detokenizer(tokenBytes: (id: number) => Uint8Array): Utf8Detokenizer {
  const decoder = new TextDecoder("utf-8");
  const opts = { stream: true };
  return {
    push(ids) {
      if (ids.length === 1) return decoder.decode(tokenBytes(ids[0]!), opts);
      let out = "";
      for (let i = 0; i < ids.length; i++) out += decoder.decode(tokenBytes(ids[i]!), opts);
      return out;
    },
    flush() {
      return decoder.decode();
    },
  };
}
