import { expect, test } from "bun:test";
import { createChatChunkEncoder, createCompletionChunkEncoder, DONE_FRAME } from "./chunks";

const ctx = { id: "chatcmpl-1", created: 1700000000, model: "m", includeUsage: true };
const parse = (frame: string) => {
  expect(frame.startsWith("data: ")).toBe(true);
  expect(frame.endsWith("\n\n")).toBe(true);
  return JSON.parse(frame.slice(6));
};

test("chat chunks match OpenAI's shape", () => {
  const e = createChatChunkEncoder(ctx);
  expect(parse(e.start())).toEqual({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1700000000,
    model: "m",
    system_fingerprint: null,
    choices: [{ index: 0, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null }],
    usage: null,
  });
  expect(parse(e.content('he said "hi"\n')).choices[0].delta).toEqual({ content: 'he said "hi"\n' });
  expect(parse(e.finish("length")).choices[0]).toEqual({ index: 0, delta: {}, logprobs: null, finish_reason: "length" });
  const u = parse(e.usage({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }));
  expect(u.choices).toEqual([]);
  expect(u.usage).toEqual({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
  expect(DONE_FRAME).toBe("data: [DONE]\n\n");
});

test("without include_usage there is no usage key and no usage frame", () => {
  const e = createChatChunkEncoder({ ...ctx, includeUsage: false });
  expect("usage" in parse(e.content("x"))).toBe(false);
  expect(e.usage({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 })).toBe("");
});

test("text completion chunks", () => {
  const e = createCompletionChunkEncoder({ ...ctx, id: "cmpl-1" });
  expect(e.start()).toBe("");
  const c = parse(e.content("abc"));
  expect(c.object).toBe("text_completion");
  expect(c.choices).toEqual([{ text: "abc", index: 0, logprobs: null, finish_reason: null }]);
  expect(parse(e.finish("stop")).choices[0].finish_reason).toBe("stop");
});
