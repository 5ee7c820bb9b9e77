import { describe, expect, test } from "bun:test";
import { hashBlocks, rootHash } from "./block-hash";

describe("hashBlocks", () => {
  const root = rootHash("m");
  const tokens = Array.from({ length: 40 }, (_, i) => (i * 7919) % 1000);

  test("only full blocks are hashed", () => {
    expect(hashBlocks(tokens, 16, root)).toHaveLength(2);
    expect(hashBlocks(tokens.slice(0, 15), 16, root)).toHaveLength(0);
  });

  test("a shared prefix gives shared hashes, and a change propagates to every later block", () => {
    const other = [...tokens];
    other[20] = 999_999;
    const a = hashBlocks(tokens, 8, root);
    const b = hashBlocks(other, 8, root);
    expect(b[0]).toBe(a[0]!);
    expect(b[1]).toBe(a[1]!);
    for (let i = 2; i < a.length; i++) expect(b[i]).not.toBe(a[i]!);
  });

  test("the model id salts every block", () => {
    expect(hashBlocks(tokens, 16, rootHash("other"))[0]).not.toBe(hashBlocks(tokens, 16, root)[0]!);
  });

  test("maxBlocks bounds the work and bad block sizes are refused", () => {
    expect(hashBlocks(tokens, 4, root, 3)).toEqual(hashBlocks(tokens, 4, root).slice(0, 3));
    expect(() => hashBlocks(tokens, 0, root)).toThrow(RangeError);
  });
});
