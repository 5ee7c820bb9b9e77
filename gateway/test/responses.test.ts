/**
 * The Responses API (`/v1/responses`) driven by the official openai client: plain text, instructions, streaming
 * events in the API's order, reasoning and tool calls as output items, conversations continued through
 * `previous_response_id` (what the model is shown), stored responses read, listed and deleted (and hidden from other
 * API keys), the length cut, a failure mid-stream, refusals of what cannot be honoured, an OpenAI-HTTP backend
 * (given a chat body), and two gateways sharing the store through a real Redis. Fake model servers answer text the
 * test chooses and record the prompt they were given.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { testRedis } from "@dispatch/common/src/testing/redis";
import OpenAI from "openai";
import { type ConnectFake, lastPromptText, startConnectFake } from "./fakes/connect-fake";
import { type OpenAIFake, startOpenAIFake } from "./fakes/openai-fake";
import { CHATML_THINKING, CHATML_TOOLS } from "./fakes/test-model";
import { startGateway, type TestGateway } from "./start-gateway";

let tools: ConnectFake;
let think: ConnectFake;
let upstream: OpenAIFake;
let t: TestGateway;
const KEYS = ["key-a", "key-b"];

beforeAll(async () => {
  tools = await startConnectFake({ modelId: "tools-moe", chatTemplate: CHATML_TOOLS });
  think = await startConnectFake({ modelId: "think-moe", chatTemplate: CHATML_THINKING });
  upstream = startOpenAIFake({ models: ["upstream-model"] });
  t = await startGateway(
    {
      auth: { api_keys: KEYS },
      backends: [
        { kind: "dispatch", url: tools.url },
        { kind: "dispatch", url: think.url },
        { kind: "openai", url: upstream.url },
      ],
    },
    "key-a",
  );
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
  tools.failOnCall = -1;
});

const lastPrompt = lastPromptText;

const post = (body: unknown, key = "key-a") =>
  fetch(`${t.url}/v1/responses`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });

test("a string input: one message item with the text, usage, status completed", async () => {
  const r = await t.client.responses.create({ model: "tools-moe", input: "hi there" });
  expect(r.id).toMatch(/^resp_[0-9a-f]{48}$/);
  expect(r.object).toBe("response");
  expect(r.status).toBe("completed");
  expect(r.output_text).toBe("Hello, world!");
  expect(r.output).toHaveLength(1);
  expect(r.output[0]).toMatchObject({ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Hello, world!", annotations: [] }] });
  expect(r.usage!.output_tokens).toBe("Hello, world!".length + 1);
  expect(r.usage!.input_tokens).toBe(tools.requests.at(-1)!.promptTokenIds.length);
  expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + r.usage!.output_tokens);
  expect(lastPrompt(tools)).toBe("user\nhi thereassistant"); // the template trims before each <|im_end|>
});

test("instructions open the prompt; previous_response_id continues the conversation without them", async () => {
  tools.reply = "Paris.";
  const first = await t.client.responses.create({ model: "tools-moe", instructions: "Answer in one word.", input: "Capital of France?" });
  expect(lastPrompt(tools)).toBe("system\nAnswer in one word.user\nCapital of France?assistant");
  tools.reply = "Berlin.";
  const second = await t.client.responses.create({ model: "tools-moe", previous_response_id: first.id, input: [{ role: "user", content: "And Germany?" }] });
  expect(second.previous_response_id).toBe(first.id);
  expect(second.instructions).toBeNull();
  expect(lastPrompt(tools)).toBe("user\nCapital of France?assistant\nParis.user\nAnd Germany?assistant");
  tools.reply = "Rome.";
  await t.client.responses.create({ model: "tools-moe", previous_response_id: second.id, instructions: "Be terse.", input: "Italy?" });
  expect(lastPrompt(tools)).toBe("system\nBe terse.user\nCapital of France?assistant\nParis.user\nAnd Germany?assistant\nBerlin.user\nItaly?assistant");
});

test("streaming: the API's events in order, numbered, and the final response", async () => {
  const stream = t.client.responses.stream({ model: "tools-moe", input: "hi" });
  const types: string[] = [];
  const seqs: number[] = [];
  let text = "";
  for await (const e of stream) {
    types.push(e.type);
    seqs.push(e.sequence_number);
    if (e.type === "response.output_text.delta") text += e.delta;
  }
  const final = await stream.finalResponse();
  expect(text).toBe("Hello, world!");
  expect(final.output_text).toBe("Hello, world!");
  expect(final.status).toBe("completed");
  expect(final.usage!.output_tokens).toBe(14);
  expect(seqs).toEqual(seqs.map((_, i) => i));
  const squeezed = types.filter((x, i) => x !== types[i - 1]);
  expect(squeezed).toEqual([
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
  ]);
  // the stored response is the streamed one
  const got = await t.client.responses.retrieve(final.id);
  expect(got.output_text).toBe("Hello, world!");
});

test("a reasoning model: a reasoning item, then the message; streamed as reasoning_text events", async () => {
  think.reply = "<think>\nA greeting.\n</think>\n\nHi!";
  const r = await t.client.responses.create({ model: "think-moe", input: "hi" });
  expect(r.output.map((o) => o.type)).toEqual(["reasoning", "message"]);
  expect(r.output[0]).toMatchObject({ type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "A greeting." }] });
  expect(r.output_text).toBe("Hi!");
  expect(r.usage!.output_tokens_details.reasoning_tokens).toBe("<think>\nA greeting.\n</think>".length);
  const types = new Set<string>();
  let reasoning = "";
  for await (const e of await t.client.responses.create({ model: "think-moe", input: "hi", stream: true })) {
    types.add(e.type);
    if (e.type === "response.reasoning_text.delta") reasoning += e.delta;
  }
  expect(reasoning).toBe("A greeting.");
  expect(types.has("response.reasoning_text.done")).toBe(true);
});

const weather = {
  type: "function" as const,
  name: "get_weather",
  description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: false,
};

test("tool calls: function_call items; the call's output continues the conversation", async () => {
  tools.reply = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
  const r = await t.client.responses.create({ model: "tools-moe", input: "Weather in Paris?", tools: [weather] });
  expect(r.output.map((o) => o.type)).toEqual(["message", "function_call"]);
  const call = r.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
  expect(call).toMatchObject({ type: "function_call", name: "get_weather", status: "completed" });
  expect(JSON.parse(call.arguments)).toEqual({ city: "Paris" });
  expect(call.call_id).toMatch(/^call_/);
  expect(r.tools).toEqual([weather]);
  // the tools reached the template in chat form
  expect(lastPrompt(tools)).toContain('"name": "get_weather"');

  tools.reply = "It is sunny.";
  const next = await t.client.responses.create({
    model: "tools-moe",
    previous_response_id: r.id,
    tools: [weather],
    input: [{ type: "function_call_output", call_id: call.call_id, output: '{"sky": "sunny"}' }],
  });
  expect(next.output_text).toBe("It is sunny.");
  const prompt = lastPrompt(tools);
  expect(prompt).toContain('Weather in Paris?assistant\nLet me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris"}}\n</tool_call>');
  expect(prompt).toContain('user\n<tool_response>\n{"sky": "sunny"}\n</tool_response>');

  // streamed: the call as an item with its arguments' events
  tools.reply = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>';
  const types: string[] = [];
  let args = "";
  for await (const e of await t.client.responses.create({ model: "tools-moe", input: "Oslo?", tools: [weather], stream: true })) {
    types.push(e.type);
    if (e.type === "response.function_call_arguments.done") args = e.arguments;
  }
  expect(JSON.parse(args)).toEqual({ city: "Oslo" });
  expect(types).toContain("response.function_call_arguments.delta");
});

test("tool_choice as a named function goes to the model server as a forced call", async () => {
  tools.reply = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>';
  const r = await t.client.responses.create({ model: "tools-moe", input: "Rome?", tools: [weather], tool_choice: { type: "function", name: "get_weather" } });
  expect(r.output.at(-1)).toMatchObject({ type: "function_call", name: "get_weather" });
  expect(tools.requests.at(-1)!.jsonSchema).toContain("get_weather");
});

test("text.format json_schema is JSON mode on the model server", async () => {
  tools.reply = '{"a": 1}';
  const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"], additionalProperties: false };
  const r = await t.client.responses.create({ model: "tools-moe", input: "an object", text: { format: { type: "json_schema", name: "obj", schema, strict: true } } });
  expect(JSON.parse(r.output_text)).toEqual({ a: 1 });
  expect(JSON.parse(tools.requests.at(-1)!.jsonSchema)).toEqual(schema);
  expect(r.text?.format).toMatchObject({ type: "json_schema", name: "obj" });
});

test("max_output_tokens cuts it: status incomplete, reason max_output_tokens", async () => {
  const r = await t.client.responses.create({ model: "tools-moe", input: "hi", max_output_tokens: 4 });
  expect(r.status).toBe("incomplete");
  expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
  expect(r.output_text).toBe("Hell");
  expect(r.output[0]).toMatchObject({ status: "incomplete" });
  expect(r.max_output_tokens).toBe(4);
});

test("a failure mid-stream: response.failed, then an error the client raises", async () => {
  tools.failAfterTokens = 3;
  const types: string[] = [];
  let failed: unknown;
  let thrown: unknown;
  try {
    for await (const e of await t.client.responses.create({ model: "tools-moe", input: "hi", stream: true })) {
      types.push(e.type);
      if (e.type === "response.failed") failed = e.response;
    }
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(OpenAI.APIError);
  expect(types.at(-1)).toBe("response.failed");
  expect(failed).toMatchObject({ status: "failed", error: { code: "server_error" } });
});

describe("stored responses", () => {
  test("retrieve, list input items (paged), delete; then 404", async () => {
    const r = await t.client.responses.create({
      model: "tools-moe",
      input: [
        { role: "user", content: "one" },
        { role: "assistant", content: "two" },
        { role: "user", content: [{ type: "input_text", text: "three" }] },
      ],
      metadata: { ticket: "42" },
    });
    const got = await t.client.responses.retrieve(r.id);
    expect(got).toMatchObject({ id: r.id, status: "completed", metadata: { ticket: "42" }, output_text: "Hello, world!" });
    const page = await t.client.responses.inputItems.list(r.id, { order: "asc", limit: 2 });
    expect(page.data.map((i) => (i as { content: { text: string }[] }).content[0]!.text)).toEqual(["one", "two"]);
    expect(page.has_more).toBe(true);
    const rest = await t.client.responses.inputItems.list(r.id, { order: "asc", after: page.data[1]!.id });
    expect(rest.data.map((i) => (i as { content: { text: string }[] }).content[0]!.text)).toEqual(["three"]);
    const desc = await t.client.responses.inputItems.list(r.id);
    expect(desc.data.map((i) => (i as { content: { text: string }[] }).content[0]!.text)).toEqual(["three", "two", "one"]);
    expect(await (await fetch(`${t.url}/metrics`)).text()).toMatch(/dispatch_gateway_responses_stored_total\{outcome="stored"\} [1-9]/);
    await t.client.responses.delete(r.id);
    const gone = await t.client.responses.retrieve(r.id).catch((e) => e);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("another API key sees none of them", async () => {
    const r = await t.client.responses.create({ model: "tools-moe", input: "mine" });
    const res = await fetch(`${t.url}/v1/responses/${r.id}`, { headers: { authorization: "Bearer key-b" } });
    expect(res.status).toBe(404);
    const cont = await post({ model: "tools-moe", input: "more", previous_response_id: r.id }, "key-b");
    expect(cont.status).toBe(404);
    expect(((await cont.json()) as { error: { code: string } }).error.code).toBe("previous_response_not_found");
  });

  test("store: false keeps nothing", async () => {
    const r = await t.client.responses.create({ model: "tools-moe", input: "hi", store: false });
    expect((r as unknown as { store: boolean }).store).toBe(false);
    expect(await t.client.responses.retrieve(r.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("refused with a 400 naming the parameter", () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["a built-in tool", { tools: [{ type: "web_search" }] }, "tools[0].type"],
    ["truncation auto", { truncation: "auto" }, "truncation"],
    ["an image part", { input: [{ role: "user", content: [{ type: "input_image", image_url: "http://x" }] }] }, "input[0].content[0].type"],
    ["an unknown item type", { input: [{ type: "computer_call_output" }] }, "input[0].type"],
    ["no input", { input: [] }, "input"],
    ["a function_call without call_id", { input: [{ type: "function_call", name: "f", arguments: "{}" }] }, "input[0].call_id"],
    ["a bad text.format", { text: { format: { type: "xml" } } }, "text.format.type"],
    ["too much metadata", { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
  ];
  for (const [name, extra, param] of cases) {
    test(name, async () => {
      const res = await post({ model: "tools-moe", input: "hi", ...extra });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { param: string; type: string } };
      expect(body.error).toMatchObject({ param, type: "invalid_request_error" });
    });
  }

  test("an unknown previous_response_id is a 404", async () => {
    const res = await post({ model: "tools-moe", input: "hi", previous_response_id: "resp_nope" });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe("previous_response_id");
  });

  test("without an API key: 401", async () => {
    const res = await fetch(`${t.url}/v1/responses`, { method: "POST", body: JSON.stringify({ model: "tools-moe", input: "hi" }) });
    expect(res.status).toBe(401);
  });
});

test("an OpenAI-HTTP backend is sent a chat completion and its answer comes back as a response", async () => {
  upstream.pieces = ["Up", "stream"];
  const r = await t.client.responses.create({ model: "upstream-model", instructions: "sys", input: "hi", max_output_tokens: 9 });
  expect(r.output_text).toBe("Upstream");
  const sent = JSON.parse(upstream.bodies.at(-1)!) as Record<string, unknown>;
  expect(sent).toMatchObject({ model: "upstream-model", max_completion_tokens: 9, messages: [{ role: "system", content: "sys" }, { role: "user", content: "hi" }] });
  let text = "";
  for await (const e of await t.client.responses.create({ model: "upstream-model", input: "hi", stream: true })) if (e.type === "response.output_text.delta") text += e.delta;
  expect(text).toBe("Upstream");
  expect(JSON.parse(upstream.bodies.at(-1)!)).toMatchObject({ stream: true, stream_options: { include_usage: true } });
});

test("two gateways sharing Redis: a response made on one is continued on the other", async () => {
  const { url } = await testRedis();
  const prefix = `resp-${Date.now()}`;
  const a = await startGateway({ redis: { url }, backends: [{ kind: "dispatch", url: tools.url }] }, "k", { replicaId: `${prefix}-a` });
  const b = await startGateway({ redis: { url }, backends: [{ kind: "dispatch", url: tools.url }] }, "k", { replicaId: `${prefix}-b` });
  try {
    tools.reply = "Paris.";
    const first = await a.client.responses.create({ model: "tools-moe", input: "Capital of France?" });
    expect((await b.client.responses.retrieve(first.id)).output_text).toBe("Paris.");
    tools.reply = "Berlin.";
    await b.client.responses.create({ model: "tools-moe", previous_response_id: first.id, input: "Germany?" });
    expect(lastPrompt(tools)).toBe("user\nCapital of France?assistant\nParis.user\nGermany?assistant");
    // a conversation in Redis: made on one, a turn taken on the other, its items read back on the first
    const conv = await a.client.conversations.create({ items: [{ type: "message", role: "user", content: "Hi." }] });
    tools.reply = "Hello.";
    await b.client.responses.create({ model: "tools-moe", conversation: conv.id, input: "Again." });
    expect(lastPrompt(tools)).toBe("user\nHi.user\nAgain.assistant");
    const items = await a.client.conversations.items.list(conv.id, { order: "asc" });
    expect(items.data.map((i) => (i as { content: { text: string }[] }).content[0]!.text)).toEqual(["Hi.", "Again.", "Hello."]);
    const added = await a.client.conversations.items.create(conv.id, { items: [{ type: "message", role: "user", content: "x" }] });
    await b.client.conversations.items.delete(added.data[0]!.id!, { conversation_id: conv.id });
    expect((await a.client.conversations.items.list(conv.id)).data).toHaveLength(3);
    await b.client.conversations.delete(conv.id);
    expect(await a.client.conversations.retrieve(conv.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  } finally {
    await a.stop();
    await b.stop();
  }
});

describe("background responses", () => {
  const poll = async (id: string, ms = 5000) => {
    const end = Date.now() + ms;
    for (;;) {
      const r = await t.client.responses.retrieve(id);
      if (!["queued", "in_progress"].includes(r.status!)) return r;
      if (Date.now() > end) throw new Error(`response ${id} still ${r.status}`);
      await Bun.sleep(10);
    }
  };

  test("answered at once as queued, then polled to completed under the same id", async () => {
    tools.reply = "Later.";
    const q = await t.client.responses.create({ model: "tools-moe", input: "take your time", background: true });
    expect(q).toMatchObject({ status: "queued", background: true, output: [] });
    const done = await poll(q.id);
    expect(done).toMatchObject({ id: q.id, status: "completed", background: true });
    expect(done.output_text).toBe("Later.");
    // a background response is a stored one: the conversation goes on from it
    tools.reply = "Sure.";
    await t.client.responses.create({ model: "tools-moe", previous_response_id: q.id, input: "again" });
    expect(lastPrompt(tools)).toBe("user\ntake your timeassistant\nLater.user\nagainassistant");
  });

  test("cancel stops the run: status cancelled", async () => {
    tools.reply = "x".repeat(200);
    tools.tokenDelayMs = 20;
    try {
      const q = await t.client.responses.create({ model: "tools-moe", input: "slow", background: true });
      await Bun.sleep(60);
      const c = await t.client.responses.cancel(q.id);
      expect(c.status).toBe("cancelled");
      expect((await t.client.responses.retrieve(q.id)).status).toBe("cancelled");
      // a finished one is returned as it is; a foreground one cannot be cancelled
      const fg = await t.client.responses.create({ model: "tools-moe", input: "quick", max_output_tokens: 2 });
      expect(await t.client.responses.cancel(fg.id).catch((e) => e)).toBeInstanceOf(OpenAI.BadRequestError);
    } finally {
      tools.tokenDelayMs = 0;
    }
  });

  test("a run that fails is stored as failed, with the error", async () => {
    tools.failOnCall = tools.generateCalls + 1;
    const q = await t.client.responses.create({ model: "tools-moe", input: "doomed", background: true });
    const r = await poll(q.id);
    expect(r.status).toBe("failed");
    expect(r.error?.message).toBeTruthy();
  });

  test("with stream, or without store: 400; an unknown model: 404 at once", async () => {
    for (const extra of [{ stream: true }, { store: false }]) expect((await post({ model: "tools-moe", input: "x", background: true, ...extra })).status).toBe(400);
    expect((await post({ model: "nope", input: "x", background: true })).status).toBe(404);
  });
});

describe("conversations", () => {
  test("a response in a conversation sees its items, then its turn is appended", async () => {
    const conv = await t.client.conversations.create({ items: [{ type: "message", role: "user", content: "My name is Ada." }], metadata: { topic: "names" } });
    expect(conv).toMatchObject({ object: "conversation", metadata: { topic: "names" } });
    tools.reply = "Hello Ada.";
    const r1 = await t.client.responses.create({ model: "tools-moe", conversation: conv.id, input: "Greet me." });
    expect(r1.output_text).toBe("Hello Ada.");
    expect(lastPrompt(tools)).toBe("user\nMy name is Ada.user\nGreet me.assistant");
    tools.reply = "Ada.";
    await t.client.responses.create({ model: "tools-moe", conversation: { id: conv.id }, input: "My name?" });
    expect(lastPrompt(tools)).toBe("user\nMy name is Ada.user\nGreet me.assistant\nHello Ada.user\nMy name?assistant");
    const items = await t.client.conversations.items.list(conv.id, { order: "asc" });
    expect(items.data.map((i) => (i as { content: { text: string }[] }).content[0]!.text)).toEqual(["My name is Ada.", "Greet me.", "Hello Ada.", "My name?", "Ada."]);
    // items added by hand and deleted; metadata updated; the conversation deleted
    const added = await t.client.conversations.items.create(conv.id, { items: [{ type: "message", role: "user", content: "Also: I like tea." }] });
    expect((await t.client.conversations.items.retrieve(added.data[0]!.id!, { conversation_id: conv.id })).id).toBe(added.data[0]!.id);
    await t.client.conversations.items.delete(added.data[0]!.id!, { conversation_id: conv.id });
    expect((await t.client.conversations.items.list(conv.id)).data).toHaveLength(5);
    expect((await t.client.conversations.update(conv.id, { metadata: { topic: "tea" } })).metadata).toEqual({ topic: "tea" });
    await t.client.conversations.delete(conv.id);
    expect(await t.client.conversations.retrieve(conv.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("another key's conversation, an unknown one, or one with previous_response_id: refused", async () => {
    const conv = await t.client.conversations.create({});
    const other = await fetch(`${t.url}/v1/conversations/${conv.id}`, { headers: { authorization: "Bearer key-b" } });
    expect(other.status).toBe(404);
    expect((await post({ model: "tools-moe", input: "x", conversation: conv.id }, "key-b")).status).toBe(404);
    expect((await post({ model: "tools-moe", input: "x", conversation: "conv_nope" })).status).toBe(404);
    expect((await post({ model: "tools-moe", input: "x", conversation: conv.id, previous_response_id: "resp_x" })).status).toBe(400);
  });
});

test("input_tokens: the prompt's tokens as the template renders it, the conversation's included", async () => {
  const n = await t.client.responses.inputTokens.count({ model: "tools-moe", instructions: "Be brief.", input: "hi there" });
  await t.client.responses.create({ model: "tools-moe", instructions: "Be brief.", input: "hi there" });
  expect(n).toEqual({ object: "response.input_tokens", input_tokens: tools.requests.at(-1)!.promptTokenIds.length });
  const conv = await t.client.conversations.create({ items: [{ type: "message", role: "user", content: "earlier" }] });
  const m = await t.client.responses.inputTokens.count({ model: "tools-moe", conversation: conv.id, input: "now" });
  await t.client.responses.create({ model: "tools-moe", conversation: conv.id, input: "now" });
  expect(m.input_tokens).toBe(tools.requests.at(-1)!.promptTokenIds.length);
  // an OpenAI-HTTP backend's model: its tokenizer is not here
  expect(await t.client.responses.inputTokens.count({ model: "upstream-model", input: "x" }).catch((e) => e)).toBeInstanceOf(OpenAI.BadRequestError);
});

