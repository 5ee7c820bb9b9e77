import { expect, test } from "bun:test";
import { createUtf8Detokenizer } from "./utf8-detokenizer";

// Byte-level "tokenizer": token id = byte value.
const detok = () => createUtf8Detokenizer((id) => new Uint8Array([id]));

test("multi-byte characters split over tokens are emitted only when complete", () => {
  const d = detok();
  const bytes = [...new TextEncoder().encode("é🌍✓")];
  const out = bytes.map((b) => d.push([b]));
  for (const piece of out) expect(piece.includes("\uFFFD")).toBe(false);
  expect(out.join("")).toBe("é🌍✓");
  expect(out.filter((p) => p !== "").length).toBe(3);
});

test("several tokens per step", () => {
  const d = detok();
  const bytes = [...new TextEncoder().encode("añb")];
  expect(d.push(bytes.slice(0, 2))).toBe("a");
  expect(d.push(bytes.slice(2))).toBe("ñb");
});

test("a truncated character becomes U+FFFD at the end, not before", () => {
  const d = detok();
  expect(d.push([0xf0, 0x9f])).toBe("");
  expect(d.flush()).toBe("\uFFFD");
});
