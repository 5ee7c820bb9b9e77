/**
 * Anthropic's Messages API over a real model server (the bundled tiny model on the CPU backend), with Anthropic's
 * official SDK: a greedy message is the greedy chat completion of the same conversation, token for token and in its
 * usage (the prompt's cached part reported as cache reads), streamed or not; count_tokens is the prompt the model
 * was given.
 */
import { expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { useRealModelServer } from "./real-model-server";

const real = useRealModelServer();

test("a greedy message is the greedy chat completion; streamed the same; count_tokens its prompt", async () => {
  const client = new Anthropic({ baseURL: real.gw.url, apiKey: "test-key", maxRetries: 0, timeout: 20_000 });
  const model = real.model;
  const system = "You answer about rivers.";
  const messages = [
    { role: "user" as const, content: "Tell me about the rivers of the north." },
    { role: "assistant" as const, content: "They are long and cold." },
    { role: "user" as const, content: "And the sea they run to?" },
  ];
  const chat = await real.gw.client.chat.completions.create({ model, messages: [{ role: "system", content: system }, ...messages], temperature: 0, max_completion_tokens: 24 });
  // temperature is not in the SDK's types any more (Anthropic's newer API has none); the gateway takes it (greedy here)
  const params = { model, system, messages, temperature: 0, max_tokens: 24 } as Anthropic.MessageCreateParamsNonStreaming;
  const m = await client.messages.create(params);
  const text = m.content.map((b) => (b.type === "text" ? b.text : "")).join("");
  expect(text).toBe(chat.choices[0]!.message.content!);
  expect(m.stop_reason).toBe(chat.choices[0]!.finish_reason === "length" ? "max_tokens" : "end_turn");
  expect(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0)).toBe(chat.usage!.prompt_tokens);
  expect(m.usage.output_tokens).toBe(chat.usage!.completion_tokens);
  // the same prompt a second time: the server's prefix cache served part of it
  expect(m.usage.cache_read_input_tokens).toBeGreaterThan(0);

  const final = await client.messages.stream(params).finalMessage();
  expect(final.content.map((b) => (b.type === "text" ? b.text : "")).join("")).toBe(text);
  expect((await client.messages.countTokens({ model, system, messages })).input_tokens).toBe(chat.usage!.prompt_tokens);
});
