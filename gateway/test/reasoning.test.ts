/**
 * A reasoning model's thinking through a dispatch backend, driven by the official openai client: where the model's
 * template announces `<think>` blocks the gateway answers the thinking in `reasoning_content` and the rest in
 * `content`, streamed and not, whether the model opens the block or the prompt did; `server.reasoning_parser: off`
 * gives the text as generated. The fake model servers answer with text the test chooses.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { CHATML_OPEN_THINKING, CHATML_THINKING } from "./fakes/test-model";
import { startGateway, type TestGateway } from "./start-gateway";

let think: ConnectFake;
let open: ConnectFake;
let t: TestGateway;

beforeAll(async () => {
  think = await startConnectFake({ modelId: "think-moe", chatTemplate: CHATML_THINKING });
  open = await startConnectFake({ modelId: "r1-moe", chatTemplate: CHATML_OPEN_THINKING });
  t = await startGateway({ backends: [{ kind: "dispatch", url: think.url }, { kind: "dispatch", url: open.url }] });
});
afterAll(async () => {
  await t.stop();
  think.stop();
  open.stop();
});
afterEach(() => {
  think.reply = "Hello, world!";
});

const messages = [{ role: "user" as const, content: "hi" }];
const answer = "<think>\nThe user greets me.\nGreet back.\n</think>\n\nHello! How can I help?";

test("non-streaming: the thinking in reasoning_content, the answer in content", async () => {
  think.reply = answer;
  const r = await t.client.chat.completions.create({ model: "think-moe", messages });
  const m = r.choices[0]!.message as typeof r.choices[0]["message"] & { reasoning_content?: string | null };
  expect(m.content).toBe("Hello! How can I help?");
  expect(m.reasoning_content).toBe("The user greets me.\nGreet back.");
  expect(r.choices[0]!.finish_reason).toBe("stop");
  // every generated token is counted, the thinking's too; the thinking's (one token per byte here) apart
  expect(r.usage!.completion_tokens).toBe(new TextEncoder().encode(answer).length + 1);
  expect(r.usage!.completion_tokens_details?.reasoning_tokens).toBe("<think>\nThe user greets me.\nGreet back.\n</think>".length);
});

test("streaming: reasoning_content deltas, then the content", async () => {
  think.reply = answer;
  let reasoning = "";
  let content = "";
  const order: string[] = [];
  for await (const c of await t.client.chat.completions.create({ model: "think-moe", messages, stream: true })) {
    const d = c.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
    if (d?.reasoning_content) (reasoning += d.reasoning_content), order.push("r");
    if (d?.content) (content += d.content), order.push("c");
  }
  expect(reasoning).toBe("The user greets me.\nGreet back.");
  expect(content).toBe("Hello! How can I help?");
  expect(order.indexOf("c")).toBeGreaterThan(order.lastIndexOf("r"));
});

test("thinking off in the template (chat_template_kwargs): no reasoning, the text is the answer", async () => {
  think.reply = "Hello!";
  const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "think-moe", messages, chat_template_kwargs: { enable_thinking: false } }) });
  const body = (await res.json()) as { choices: { message: { content: string; reasoning_content: string | null } }[] };
  expect(body.choices[0]!.message).toMatchObject({ content: "Hello!", reasoning_content: null });
  expect((body as unknown as { usage: { completion_tokens_details: unknown } }).usage.completion_tokens_details).toEqual({ reasoning_tokens: 0 });
  const prompt = new TextDecoder().decode(Uint8Array.from(think.requests.at(-1)!.promptTokenIds.filter((id) => id < 256)));
  expect(prompt.endsWith("<think>\n\n</think>\n\n")).toBe(true);
});

test("a template that opens the block: the generation starts inside it", async () => {
  open.reply = "Pondering the greeting.\n</think>\n\nHi there.";
  const r = await t.client.chat.completions.create({ model: "r1-moe", messages });
  const m = r.choices[0]!.message as typeof r.choices[0]["message"] & { reasoning_content?: string | null };
  expect([m.reasoning_content, m.content]).toEqual(["Pondering the greeting.", "Hi there."]);
  expect(r.usage!.completion_tokens_details?.reasoning_tokens).toBe("Pondering the greeting.\n</think>".length);
});

test("JSON mode on a reasoning model: the thinking may come first (or is already open), then the object", async () => {
  think.reply = '<think>\nAn object with a.\n</think>\n\n{"a": 1}';
  const r = await t.client.chat.completions.create({ model: "think-moe", messages, response_format: { type: "json_object" } });
  const m = r.choices[0]!.message as typeof r.choices[0]["message"] & { reasoning_content?: string | null };
  expect([m.reasoning_content, m.content]).toEqual(["An object with a.", '{"a": 1}']);
  expect(think.requests.at(-1)!.jsonThinking).toBe("may");
  // thinking turned off in the template: the object opens the output
  await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "think-moe", messages, response_format: { type: "json_object" }, chat_template_kwargs: { enable_thinking: false } }) });
  expect(think.requests.at(-1)!.jsonThinking).toBe("");
  // the prompt opened the block: the generation is inside it
  await t.client.chat.completions.create({ model: "r1-moe", messages, response_format: { type: "json_object" } });
  expect(open.requests.at(-1)!.jsonThinking).toBe("inside");
  // no JSON mode: nothing to say
  await t.client.chat.completions.create({ model: "think-moe", messages });
  expect(think.requests.at(-1)!.jsonThinking).toBe("");
});

test("server.reasoning_parser off: the text as generated", async () => {
  const raw = await startGateway({ server: { reasoning_parser: "off" }, backends: [{ kind: "dispatch", url: think.url }] });
  try {
    think.reply = answer;
    const r = await raw.client.chat.completions.create({ model: "think-moe", messages });
    expect(r.choices[0]!.message.content).toBe(answer);
    expect("reasoning_content" in r.choices[0]!.message).toBe(false);
  } finally {
    await raw.stop();
  }
});
