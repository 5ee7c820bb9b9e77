import { expect, test } from "bun:test";
import { createSseParser } from "./sse-parser";

const enc = (s: string) => new TextEncoder().encode(s);

test("events split anywhere across byte chunks", () => {
  const text = 'data: {"a":1}\n\n: comment\n\nevent: x\ndata: {"b":"é"}\n\r\ndata: [DONE]\n\n';
  const bytes = enc(text);
  for (const step of [1, 2, 3, 7, bytes.length]) {
    const p = createSseParser();
    const got: string[] = [];
    for (let i = 0; i < bytes.length; i += step) got.push(...p.push(bytes.subarray(i, i + step)));
    got.push(...p.end());
    expect(got).toEqual(['{"a":1}', '{"b":"é"}', "[DONE]"]);
  }
});

test("multi-line data joins with newlines; no space after the colon is fine", () => {
  const p = createSseParser();
  expect(p.push(enc("data:one\ndata: two\n\n"))).toEqual(["one\ntwo"]);
});

test("an unterminated last event is dropped at the end", () => {
  const p = createSseParser();
  expect(p.push(enc("data: x\n"))).toEqual([]);
  expect(p.end()).toEqual([]);
});
