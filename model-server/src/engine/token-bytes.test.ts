import { expect, test } from "bun:test";
import { createDetokenizer } from "./detokenizer";
import { tokenBytesFromRanks } from "./token-bytes";

test("bytes from a tiktoken ranks file and special tokens", () => {
  const b64 = (s: string | Uint8Array) => Buffer.from(s).toString("base64");
  const euro = new TextEncoder().encode("€");
  const ranks = [`${b64("a")} 0`, `${b64(" cat")} 1`, `${b64(euro.slice(0, 2))} 2`, `${b64(euro.slice(2))} 3`].join("\n") + "\n";
  const bytesOf = tokenBytesFromRanks(new TextEncoder().encode(ranks), { "<|end|>": 4 });
  const d = createDetokenizer(bytesOf);
  expect(d.push([0, 1])).toBe("a cat");
  expect(d.push([2])).toBe("");
  expect(d.push([3, 4])).toBe("€<|end|>");
  expect(bytesOf(99).length).toBe(0);
  expect(() => tokenBytesFromRanks("garbage", {})).toThrow(/malformed/);
});
