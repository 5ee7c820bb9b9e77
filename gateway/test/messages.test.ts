/**
 * Anthropic's Messages API (`/v1/messages`) driven by Anthropic's official SDK: text, system prompts, streaming
 * events and the SDK's assembled final message, thinking blocks from a reasoning model, tool use and the
 * conversation continued with its result (what the template is shown), the length cut, a failure mid-stream,
 * count_tokens, errors in Anthropic's shape, the key as `x-api-key`, and an OpenAI-HTTP backend (sent a chat body).
 * Fake model servers answer text the test chooses and record the prompt they were given.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { type ConnectFake, lastPromptText, startConnectFake } from "./fakes/connect-fake";
import { type OpenAIFake, startOpenAIFake } from "./fakes/openai-fake";
import { CHATML_THINKING, CHATML_TOOLS } from "./fakes/test-model";
import { startGateway, type TestGateway } from "./start-gateway";

let tools: ConnectFake;
let think: ConnectFake;
let upstream: OpenAIFake;
let t: TestGateway;
let client: Anthropic;

beforeAll(async () => {
  tools = await startConnectFake({ modelId: "tools-moe", chatTemplate: CHATML_TOOLS });
  think = await startConnectFake({ modelId: "think-moe", chatTemplate: CHATML_THINKING });
  upstream = startOpenAIFake({ models: ["upstream-model"] });
  t = await startGateway({
    auth: { api_keys: ["key-a"] },
    backends: [
      { kind: "dispatch", url: tools.url },
      { kind: "dispatch", url: think.url },
      { kind: "openai", url: upstream.url },
    ],
  });
  // the SDK sends the key as x-api-key
  client = new Anthropic({ baseURL: t.url, apiKey: "key-a", maxRetries: 0, timeout: 10_000 });
});
afterAll(async () => {
  await t.stop();
  tools.stop();
  think.stop();
  upstream.stop();
});
afterEach(() => {
  tools.reply = "Hello, world!";
  tools.failAfterTokens = -1;
});

const lastPrompt = lastPromptText;

test("a text message: one text block, end_turn, usage; the system prompt first", async () => {
  const m = await client.messages.create({ model: "tools-moe", max_tokens: 64, system: "Be brief.", messages: [{ role: "user", content: "hi" }] });
  expect(m.id).toMatch(/^msg_/);
  expect(m).toMatchObject({ type: "message", role: "assistant", model: "tools-moe", stop_reason: "end_turn", stop_sequence: null, content: [{ type: "text", text: "Hello, world!", citations: null }] });
  const prompt = tools.requests.at(-1)!.promptTokenIds.length;
  expect(m.usage).toMatchObject({ input_tokens: prompt, output_tokens: 14, cache_read_input_tokens: 0 });
  expect(lastPrompt(tools)).toBe("system\nBe brief.user\nhiassistant");
});

test("streaming: the API's events, and the SDK's final message", async () => {
  const stream = client.messages.stream({ model: "tools-moe", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
  const types: string[] = [];
  let text = "";
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === "content_block_delta" && e.delta.type === "text_delta") text += e.delta.text;
  }
  const final = await stream.finalMessage();
  expect(text).toBe("Hello, world!");
  expect(final.content as unknown[]).toEqual([{ type: "text", text: "Hello, world!", citations: null }]);
  expect(final.stop_reason).toBe("end_turn");
  expect(final.usage.output_tokens).toBe(14);
  expect(final.usage.input_tokens).toBe(tools.requests.at(-1)!.promptTokenIds.length);
  expect(types.filter((x, i) => x !== types[i - 1])).toEqual(["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]);
});

test("a reasoning model: a thinking block, then the text; thinking disabled goes to the template", async () => {
  think.reply = "<think>\nA greeting.\n</think>\n\nHi!";
  const m = await client.messages.create({ model: "think-moe", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
  expect(m.content).toEqual([
    { type: "thinking", thinking: "A greeting.", signature: "" },
    { type: "text", text: "Hi!", citations: null },
  ]);
  const stream = client.messages.stream({ model: "think-moe", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
  let thinking = "";
  for await (const e of stream) if (e.type === "content_block_delta" && e.delta.type === "thinking_delta") thinking += e.delta.thinking;
  expect(thinking).toBe("A greeting.");
  think.reply = "Hi!";
  await client.messages.create({ model: "think-moe", max_tokens: 64, thinking: { type: "disabled" }, messages: [{ role: "user", content: "hi" }] });
  expect(lastPrompt(think).endsWith("<think>\n\n</think>\n\n")).toBe(true);
});

const weather: Anthropic.Tool = { name: "get_weather", description: "Weather of a city", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

test("tool use: a tool_use block with its input; the result continues the conversation", async () => {
  tools.reply = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
  const m = await client.messages.create({ model: "tools-moe", max_tokens: 128, tools: [weather], messages: [{ role: "user", content: "Weather in Paris?" }] });
  expect(m.stop_reason).toBe("tool_use");
  expect(m.content[0]).toEqual({ type: "text", text: "Let me look.\n", citations: null });
  const use = m.content[1] as Anthropic.ToolUseBlock;
  expect(use).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Paris" } });
  expect(lastPrompt(tools)).toContain('"name": "get_weather"');

  tools.reply = "Sunny.";
  const next = await client.messages.create({
    model: "tools-moe",
    max_tokens: 64,
    tools: [weather],
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: m.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: '{"sky": "sunny"}' }] },
    ],
  });
  expect(next.content).toEqual([{ type: "text", text: "Sunny.", citations: null }]);
  const prompt = lastPrompt(tools);
  expect(prompt).toContain('Weather in Paris?assistant\nLet me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris"}}\n</tool_call>');
  expect(prompt).toContain('user\n<tool_response>\n{"sky": "sunny"}\n</tool_response>');

  // streamed: the input as input_json_delta pieces, assembled by the SDK
  tools.reply = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>';
  const stream = client.messages.stream({ model: "tools-moe", max_tokens: 128, tools: [weather], tool_choice: { type: "tool", name: "get_weather" }, messages: [{ role: "user", content: "Oslo?" }] });
  const final = await stream.finalMessage();
  expect(final.content.at(-1)).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Oslo" } });
  expect(tools.requests.at(-1)!.jsonSchema).toContain("get_weather");
});

test("max_tokens cuts it: stop_reason max_tokens", async () => {
  const m = await client.messages.create({ model: "tools-moe", max_tokens: 4, messages: [{ role: "user", content: "hi" }] });
  expect(m.stop_reason).toBe("max_tokens");
  expect(m.content).toEqual([{ type: "text", text: "Hell", citations: null }]);
});

test("a failure mid-stream: an error event, which the SDK raises", async () => {
  tools.failAfterTokens = 3;
  const stream = client.messages.stream({ model: "tools-moe", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
  const err = await stream.finalMessage().catch((e) => e);
  expect(err).toBeInstanceOf(Anthropic.APIError);
});

test("count_tokens: the prompt's tokens as the template renders it", async () => {
  const body = { model: "tools-moe", system: "Be brief.", messages: [{ role: "user" as const, content: "hi" }] };
  const n = await client.messages.countTokens(body);
  await client.messages.create({ ...body, max_tokens: 4 });
  expect(n.input_tokens).toBe(tools.requests.at(-1)!.promptTokenIds.length);
});

describe("errors in Anthropic's shape", () => {
  const post = (body: unknown, headers: Record<string, string> = { "x-api-key": "key-a" }) =>
    fetch(`${t.url}/v1/messages`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const cases: [string, Record<string, unknown>, number, string][] = [
    ["max_tokens missing", { model: "tools-moe", messages: [{ role: "user", content: "hi" }] }, 400, "invalid_request_error"],
    ["an image block", { model: "tools-moe", max_tokens: 8, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }, 400, "invalid_request_error"],
    ["a server tool", { model: "tools-moe", max_tokens: 8, tools: [{ type: "web_search_20250305", name: "web_search" }], messages: [{ role: "user", content: "hi" }] }, 400, "invalid_request_error"],
    ["a bad role", { model: "tools-moe", max_tokens: 8, messages: [{ role: "system", content: "hi" }] }, 400, "invalid_request_error"],
    ["temperature above 1", { model: "tools-moe", max_tokens: 8, temperature: 1.5, messages: [{ role: "user", content: "hi" }] }, 400, "invalid_request_error"],
    ["an unknown model", { model: "nope", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }, 404, "not_found_error"],
  ];
  for (const [name, body, status, type] of cases) {
    test(name, async () => {
      const res = await post(body);
      expect(res.status).toBe(status);
      expect(await res.json()).toMatchObject({ type: "error", error: { type } });
    });
  }
  test("no key, a wrong key: 401 authentication_error", async () => {
    for (const h of [{}, { "x-api-key": "wrong" }] as Record<string, string>[]) {
      const res = await post({ model: "tools-moe", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }, h);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    }
    expect(await client.messages.create({ model: "nope", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }).catch((e) => e)).toBeInstanceOf(Anthropic.NotFoundError);
  });
});

test("an OpenAI-HTTP backend is sent a chat completion; its answer comes back as a message", async () => {
  upstream.pieces = ["Up", "stream"];
  const m = await client.messages.create({ model: "upstream-model", max_tokens: 9, system: "sys", stop_sequences: ["END"], messages: [{ role: "user", content: "hi" }] });
  expect(m.content).toEqual([{ type: "text", text: "Upstream", citations: null }]);
  expect(JSON.parse(upstream.bodies.at(-1)!)).toMatchObject({ model: "upstream-model", max_completion_tokens: 9, stop: ["END"], messages: [{ role: "system", content: "sys" }, { role: "user", content: "hi" }] });
  const final = await client.messages.stream({ model: "upstream-model", max_tokens: 9, messages: [{ role: "user", content: "hi" }] }).finalMessage();
  expect(final.content as unknown[]).toEqual([{ type: "text", text: "Upstream", citations: null }]);
});

test("a stop sequence: stop_reason stop_sequence naming it (from the chat choice's vLLM-style stop_reason)", async () => {
  const m = await client.messages.create({ model: "tools-moe", max_tokens: 64, stop_sequences: ["zz", "o, w"], messages: [{ role: "user", content: "hi" }] });
  expect(m).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: "o, w", content: [{ type: "text", text: "Hell" }] });
  const final = await client.messages.stream({ model: "tools-moe", max_tokens: 64, stop_sequences: ["o, w"], messages: [{ role: "user", content: "hi" }] }).finalMessage();
  expect([final.stop_reason, final.stop_sequence]).toEqual(["stop_sequence", "o, w"]);
  // the chat completion carries it too, streamed and not; a choice that ended otherwise has none
  const chat = async (body: Record<string, unknown>) => (await fetch(`${t.url}/v1/chat/completions`, { method: "POST", headers: { authorization: "Bearer key-a" }, body: JSON.stringify({ model: "tools-moe", messages: [{ role: "user", content: "hi" }], ...body }) })).text();
  expect(JSON.parse(await chat({ stop: ["o, w"] })).choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "o, w" });
  expect(JSON.parse(await chat({})).choices[0].stop_reason).toBeUndefined();
  expect(await chat({ stop: ["o, w"], stream: true })).toContain('"finish_reason":"stop","stop_reason":"o, w"}');
});
