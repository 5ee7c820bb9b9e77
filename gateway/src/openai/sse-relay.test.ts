import { expect, test } from "bun:test";
import { createSseRelay } from "./sse-relay";

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (x: string | Uint8Array) => (typeof x === "string" ? x : new TextDecoder().decode(x));

function relayAll(text: string, step: number) {
  const r = createSseRelay();
  const bytes = enc(text);
  let out = "";
  for (let i = 0; i < bytes.length; i += step) out += dec(r.push(bytes.subarray(i, i + step)));
  out += r.end();
  return { out, r };
}

const canonical =
  'data: {"choices":[{"delta":{"content":"é"}}]}\n\n' +
  'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}}\n\n' +
  "data: [DONE]\n\n";

test("canonical streams are relayed byte for byte, split anywhere", () => {
  for (const step of [1, 2, 5, 13, 1000]) {
    const { out, r } = relayAll(canonical, step);
    expect(out).toBe(canonical);
    expect(r.done).toBe(true);
    expect(r.usage).toEqual({ promptTokens: 3, completionTokens: 7 });
  }
});

test("a whole canonical read is forwarded without copying", () => {
  const r = createSseRelay();
  const bytes = enc(canonical);
  const out = r.push(bytes);
  expect(out).toBeInstanceOf(Uint8Array);
  expect((out as Uint8Array).buffer).toBe(bytes.buffer);
});

test("non-canonical input is re-framed in OpenAI's framing", () => {
  const messy = 'data: {"a":1}\n\n: keep-alive\n\nevent: message\r\ndata:{"b":2}\r\n\r\ndata: x\ndata: y\n\ndata: [DONE]\n\ndata: {"after":true}\n\n';
  for (const step of [1, 3, 1000]) {
    const { out, r } = relayAll(messy, step);
    expect(out).toBe('data: {"a":1}\n\ndata: {"b":2}\n\ndata: x\ny\n\ndata: [DONE]\n\n');
    expect(r.done).toBe(true);
  }
});

test("nothing after [DONE] is relayed; a stream cut early is not done", () => {
  const r = createSseRelay();
  expect(dec(r.push(enc("data: [DONE]\n\ndata: {}\n\n")))).toBe("data: [DONE]\n\n");
  expect(r.push(enc("data: {}\n\n"))).toBe("");
  const cut = createSseRelay();
  expect(dec(cut.push(enc('data: {"a":1}\n\ndata: {"b"')))).toBe('data: {"a":1}\n\n');
  expect(cut.end()).toBe("");
  expect(cut.done).toBe(false);
});
