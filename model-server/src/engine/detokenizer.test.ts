import { expect, test } from "bun:test";
import { createDetokenizer } from "./detokenizer";

const enc = new TextEncoder();
// A toy byte-level vocabulary: token i is one byte, plus two multi-byte tokens.
const vocab: Uint8Array[] = Array.from({ length: 256 }, (_, i) => new Uint8Array([i]));
vocab.push(enc.encode("hé"), enc.encode("llo"));

test("a character split across tokens is emitted only once complete", () => {
  const d = createDetokenizer((id) => vocab[id]!);
  const euro = enc.encode("€"); // 3 bytes
  expect(d.push([euro[0]!])).toBe("");
  expect(d.push([euro[1]!])).toBe("");
  expect(d.push([euro[2]!, 0x21])).toBe("€!");
  expect(d.push([256, 257])).toBe("héllo");
  expect(d.flush()).toBe("");
});

test("an incomplete character at the end flushes as a replacement character", () => {
  const d = createDetokenizer((id) => vocab[id]!);
  const emoji = enc.encode("🙂");
  expect(d.push([emoji[0]!, emoji[1]!])).toBe("");
  expect(d.flush()).toBe("\uFFFD");
});
