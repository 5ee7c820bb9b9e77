/**
 * Tool calls through a dispatch backend, driven by the official openai client: the gateway renders `tools` with the
 * model's template (Hermes style, as Qwen's) and parses `<tool_call>` blocks out of the generated text into
 * OpenAI's `tool_calls`, streamed and not. The fake model server answers with text the test chooses, the tags as
 * single tokens (text_token_ids, as Qwen's tokenizer has them).
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import type OpenAI from "openai";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { CHATML_TOOLS } from "./fakes/test-model";
import { startGateway, type TestGateway } from "./start-gateway";

let fake: ConnectFake;
let t: TestGateway;

beforeAll(async () => {
  // the tags are single added tokens that are text, as in Qwen's tokenizer ("special": false): the gateway must show them
  fake = await startConnectFake({ modelId: "tool-moe", chatTemplate: CHATML_TOOLS, textTokens: { "<tool_call>": 259, "</tool_call>": 260 } });
  t = await startGateway({ backends: [{ kind: "dispatch", url: fake.url }] });
});
afterAll(async () => {
  await t.stop();
  fake.stop();
});
afterEach(() => {
  fake.reply = "Hello, world!";
  fake.tokenDelayMs = 0;
});

const model = "tool-moe";
const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } },
];
const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: "user", content: "Weather and time in Paris?" }];
const call = (name: string, args: object) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;
/** The prompt the fake got, as text (its tokenizer is bytes; the tags' tokens as their text; control tokens dropped). */
const TAGS: Record<number, string> = { 259: "<tool_call>", 260: "</tool_call>" };
const lastPrompt = () =>
  new TextDecoder().decode(Uint8Array.from(fake.requests.at(-1)!.promptTokenIds.flatMap((id) => (id < 256 ? [id] : TAGS[id] ? [...new TextEncoder().encode(TAGS[id])] : []))));

/** A streamed chat's content, tool calls (accumulated from their deltas) and finish reason, per choice. */
async function streamed(body: OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming) {
  const out = new Map<number, { content: string; calls: { id?: string; name: string; arguments: string }[]; finish: string | null }>();
  for await (const c of await t.client.chat.completions.create(body)) {
    for (const ch of c.choices) {
      const o = out.get(ch.index) ?? { content: "", calls: [], finish: null };
      out.set(ch.index, o);
      o.content += ch.delta.content ?? "";
      for (const d of ch.delta.tool_calls ?? []) {
        const slot = (o.calls[d.index] ??= { name: "", arguments: "" });
        if (d.id) slot.id = d.id;
        slot.name += d.function?.name ?? "";
        slot.arguments += d.function?.arguments ?? "";
      }
      o.finish = ch.finish_reason ?? o.finish;
    }
  }
  return out;
}

describe("tool calls on a model whose template announces them", () => {
  test("non-streaming: the tools are in the prompt; the calls come back as tool_calls, finish_reason tool_calls", async () => {
    fake.reply = `Let me look.\n${call("get_weather", { city: "Paris" })}\n${call("get_time", {})}`;
    const r = await t.client.chat.completions.create({ model, messages, tools });
    expect(lastPrompt()).toContain("<tools>");
    expect(lastPrompt()).toContain('"name": "get_weather"');
    const m = r.choices[0]!.message;
    expect(r.choices[0]!.finish_reason).toBe("tool_calls");
    expect(m.content).toBe("Let me look.\n");
    expect(m.tool_calls!.map((c) => c.type === "function" && [c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ["get_weather", { city: "Paris" }],
      ["get_time", {}],
    ]);
    for (const c of m.tool_calls!) expect(c.id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(new Set(m.tool_calls!.map((c) => c.id)).size).toBe(2);
  });

  test("streaming: the same calls as deltas and the same content", async () => {
    fake.reply = `Let me look.\n${call("get_weather", { city: "Paris" })}\n${call("get_time", {})}`;
    fake.tokenDelayMs = 0;
    const got = (await streamed({ model, messages, tools, stream: true })).get(0)!;
    expect(got.content).toBe("Let me look.\n");
    expect(got.finish).toBe("tool_calls");
    expect(got.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ["get_weather", { city: "Paris" }],
      ["get_time", {}],
    ]);
    for (const c of got.calls) expect(c.id).toMatch(/^call_/);
  });

  test("the conversation goes on: the assistant's calls and the tool's answer render into the next prompt", async () => {
    fake.reply = "It is 18 C in Paris.";
    const r = await t.client.chat.completions.create({
      model,
      tools,
      messages: [
        ...messages,
        { role: "assistant", content: "", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: '{"celsius": 18}' },
      ],
    });
    expect(r.choices[0]!.message.content).toBe("It is 18 C in Paris.");
    expect(r.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(r.choices[0]!.finish_reason).toBe("stop");
    expect(lastPrompt()).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>');
    expect(lastPrompt()).toContain('<tool_response>\n{"celsius": 18}\n</tool_response>');
  });

  test("parallel_tool_calls false keeps the first call; n = 2 gives every choice its calls", async () => {
    fake.reply = `${call("get_weather", { city: "Paris" })}${call("get_time", {})}`;
    const one = await t.client.chat.completions.create({ model, messages, tools, parallel_tool_calls: false });
    expect(one.choices[0]!.message.tool_calls!.length).toBe(1);
    expect(one.choices[0]!.message.content).toBeNull();
    const two = await streamed({ model, messages, tools, n: 2, stream: true });
    for (const i of [0, 1]) expect(two.get(i)!.calls.map((c) => c.name)).toEqual(["get_weather", "get_time"]);
  });

  test("text that is not a call stays content: no tools asked for, tool_choice none, a malformed block", async () => {
    const text = `Sure. ${call("get_weather", { city: "Paris" })}`;
    fake.reply = text;
    const plain = await t.client.chat.completions.create({ model, messages });
    expect(plain.choices[0]!.message.content).toBe(text);
    expect(plain.choices[0]!.finish_reason).toBe("stop");
    const none = await t.client.chat.completions.create({ model, messages, tools, tool_choice: "none" });
    expect(lastPrompt()).not.toContain("<tools>");
    expect(none.choices[0]!.message.content).toBe(text);
    fake.reply = "<tool_call>\n{not json}\n</tool_call>";
    const bad = await t.client.chat.completions.create({ model, messages, tools });
    expect(bad.choices[0]!.message.content).toBe("<tool_call>\n{not json}\n</tool_call>");
    expect(bad.choices[0]!.finish_reason).toBe("stop");
  });

  test("tool_choice required or named: the model server is asked for exactly one call (JSON mode between the tags)", async () => {
    fake.reply = call("get_weather", { city: "Paris" });
    const r = await t.client.chat.completions.create({ model, messages, tools, tool_choice: { type: "function", function: { name: "get_weather" } } });
    expect(r.choices[0]!.finish_reason).toBe("tool_calls");
    const got = fake.requests.at(-1)!;
    expect([got.responseFormat, got.jsonPrefix, got.jsonSuffix]).toEqual([2, "<tool_call>\n", "\n</tool_call>"]);
    expect(JSON.parse(got.jsonSchema)).toEqual({
      type: "object",
      properties: { name: { const: "get_weather" }, arguments: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
      required: ["name", "arguments"],
      additionalProperties: false,
    });
    await t.client.chat.completions.create({ model, messages, tools, tool_choice: "required" });
    // one of the two calls, each with its own arguments' schema
    expect(JSON.parse(fake.requests.at(-1)!.jsonSchema).anyOf.map((o: { properties: unknown }) => o.properties)).toEqual([
      { name: { const: "get_weather" }, arguments: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
      { name: { const: "get_time" }, arguments: { type: "object", properties: {} } },
    ]);
  });

  test("malformed tools and tool_choice: 400 naming the parameter", async () => {
    for (const [body, param, code] of [
      [{ tools, tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice", "invalid_value"],
      [{ tools, tool_choice: "required", response_format: { type: "json_object" } }, "tool_choice", "invalid_value"],
      [{ tools, tool_choice: "sometimes" }, "tool_choice", "invalid_value"],
      [{ tools: [{ type: "function" }] }, "tools[0]", "invalid_value"],
      [{ tool_choice: "required" }, "tool_choice", "invalid_value"],
    ] as const) {
      const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model, messages, ...body }) });
      expect(res.status).toBe(400);
      const err = ((await res.json()) as { error: { param: string; code: string } }).error;
      expect([err.param, err.code]).toEqual([param, code]);
    }
  });
});
