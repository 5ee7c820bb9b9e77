/**
 * Log-probabilities through the gateway from a real model server (bundled tiny model, CPU) with the official
 * `openai` client: chat's `logprobs` / `top_logprobs` (non-streaming and streaming, the same tokens) and the legacy
 * completions' `logprobs: N`, each token's text and bytes, its log-probability and its best alternatives as the
 * engine reports them; bad values are OpenAI-shaped 400s.
 */
import { expect, test } from "bun:test";
import { useRealModelServer } from "./real-model-server";

const real = useRealModelServer();
const messages = [{ role: "user" as const, content: "What is a river?" }];

test("chat: every token's log-probability and its top alternatives, the same streamed and not", async () => {
  const r = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0]!.logprobs!.content!;
  expect(r.choices[0]!.finish_reason).toBe("length");
  expect(content.length).toBe(r.usage!.completion_tokens);
  expect(content.map((t) => t.token).join("")).toBe(r.choices[0]!.message.content!);
  for (const t of content) {
    expect(t.logprob).toBeLessThanOrEqual(0);
    expect(new TextDecoder().decode(Uint8Array.from(t.bytes!))).toBe(t.token);
    expect(t.top_logprobs.length).toBe(3);
    const tops = t.top_logprobs.map((a) => a.logprob);
    expect(tops).toEqual([...tops].sort((x, y) => y - x));
    // greedy: the chosen token is the best alternative
    expect(t.top_logprobs[0]!.token).toBe(t.token);
    expect(t.top_logprobs[0]!.logprob).toBeCloseTo(t.logprob, 5);
  }
  const stream = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3, stream: true });
  const streamed: { token: string; logprob: number }[] = [];
  let text = "";
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? "";
    for (const t of c.choices[0]?.logprobs?.content ?? []) streamed.push({ token: t.token, logprob: t.logprob });
  }
  expect(text).toBe(r.choices[0]!.message.content!);
  expect(streamed).toEqual(content.map((t) => ({ token: t.token, logprob: t.logprob })));
  // logprobs without alternatives; none asked for: null
  const plain = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 4, temperature: 0, logprobs: true });
  expect(plain.choices[0]!.logprobs!.content!.every((t) => t.top_logprobs.length === 0)).toBe(true);
  const none = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 4, temperature: 0 });
  expect(none.choices[0]!.logprobs).toBeNull();
});

test("completions: logprobs N gives tokens, token_logprobs, top_logprobs and text_offset", async () => {
  const r = await real.gw.client.completions.create({ model: real.model, prompt: "A tree is", max_tokens: 10, temperature: 0, logprobs: 2 });
  const lp = r.choices[0]!.logprobs!;
  expect(lp.tokens!.length).toBe(r.usage!.completion_tokens);
  expect(lp.tokens!.join("")).toBe(r.choices[0]!.text);
  expect(lp.token_logprobs!.every((x) => x <= 0)).toBe(true);
  lp.text_offset!.forEach((off, i) => expect(off).toBe(lp.tokens!.slice(0, i).join("").length));
  lp.top_logprobs!.forEach((alts, i) => {
    expect(Object.keys(alts!).length).toBeLessThanOrEqual(2);
    expect(alts![lp.tokens![i]!]).toBeCloseTo(lp.token_logprobs![i]!, 5); // greedy: the token is among its best
  });
});

test("bad logprobs values are 400s in OpenAI's error shape", async () => {
  const post = (path: string, body: object) => fetch(`${real.gw.url}/v1/${path}`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer test-key" }, body: JSON.stringify({ model: real.model, ...body }) });
  for (const [path, body, param] of [
    ["chat/completions", { messages, top_logprobs: 2 }, "top_logprobs"],
    ["chat/completions", { messages, logprobs: true, top_logprobs: 21 }, "top_logprobs"],
    ["chat/completions", { messages, logprobs: "yes" }, "logprobs"],
    ["completions", { prompt: "x", logprobs: -1 }, "logprobs"],
    ["completions", { prompt: "x", logprobs: 1.5 }, "logprobs"],
  ] as const) {
    const res = await post(path, body);
    expect(res.status).toBe(400);
    const e = (await res.json()) as { error: { type: string; param: string } };
    expect(e.error.type).toBe("invalid_request_error");
    expect(e.error.param).toBe(param);
  }
});
