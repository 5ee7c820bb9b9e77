/**
 * Several choices (`n`) through the gateway from a real model server (bundled tiny model, CPU) with the official
 * `openai` client: n sequences, their tokens counted once per choice in the usage, greedy choices equal to a single
 * greedy request, the other choices' prompts served from the prefix choice 0 left in the cache, streamed choices
 * under their own indexes, a batch of prompts.
 */
import { expect, test } from "bun:test";
import { counterValue } from "../../bench/serving/server-metrics";
import { useRealModelServer } from "./real-model-server";

const real = useRealModelServer();
// long enough for several full KV blocks of 16 tokens
const question = `Define each of these words in one line: ${"river, mountain, valley, forest, desert, ocean, island, glacier, ".repeat(4)}`;
const messages = [{ role: "user" as const, content: question }];

const cachedTokens = async () => counterValue(await (await fetch(`${real.server.url}/metrics`)).text(), "dispatch_ms_prompt_cached_tokens_total");

test("n = 3 sampled: three choices, every token counted, the prompt once, choices 1-2 prefilled from choice 0's cache", async () => {
  const before = await cachedTokens();
  const r = await real.gw.client.chat.completions.create({ model: real.model, messages: [{ role: "user", content: `${question} (1)` }], n: 3, temperature: 1, seed: 11, max_tokens: 10, logprobs: true });
  expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
  const tokens = r.choices.map((c) => c.logprobs!.content!.length);
  for (const [i, c] of r.choices.entries()) {
    expect(c.logprobs!.content!.map((t) => t.token).join("")).toBe(c.message.content!);
    expect(c.finish_reason).toBe(tokens[i] === 10 ? "length" : "stop");
  }
  expect(r.usage!.completion_tokens).toBe(tokens.reduce((a, b) => a + b, 0));
  const single = await real.gw.client.chat.completions.create({ model: real.model, messages: [{ role: "user", content: `${question} (1)` }], max_tokens: 1, temperature: 0 });
  expect(r.usage!.prompt_tokens).toBe(single.usage!.prompt_tokens);
  // choice 0 computed the prompt; choices 1 and 2 took its full blocks from the cache (and the single request too)
  const fullBlocks = Math.floor((single.usage!.prompt_tokens - 1) / 16) * 16;
  expect(fullBlocks).toBeGreaterThanOrEqual(64);
  expect((await cachedTokens()) - before).toBeGreaterThanOrEqual(3 * fullBlocks);
});

test("n = 2 greedy: both choices are the single greedy continuation", async () => {
  const one = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 12, temperature: 0 });
  const two = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 12, temperature: 0, n: 2 });
  expect(two.choices.map((c) => c.message.content)).toEqual([one.choices[0]!.message.content, one.choices[0]!.message.content]);
  expect(two.usage!.completion_tokens).toBe(2 * one.usage!.completion_tokens);
});

test("n = 2 streamed: each choice's role, text and finish under its index, then one usage chunk", async () => {
  const stream = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 12, temperature: 0, n: 2, stream: true, stream_options: { include_usage: true } });
  const text = ["", ""];
  const finish: (string | null)[] = [null, null];
  const usage: number[] = [];
  for await (const c of stream) {
    if (c.usage) usage.push(c.usage.completion_tokens);
    for (const ch of c.choices) {
      text[ch.index] += ch.delta.content ?? "";
      if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
    }
  }
  const one = await real.gw.client.chat.completions.create({ model: real.model, messages, max_tokens: 12, temperature: 0 });
  expect(text).toEqual([one.choices[0]!.message.content!, one.choices[0]!.message.content!]);
  expect(finish).toEqual([one.choices[0]!.finish_reason, one.choices[0]!.finish_reason]);
  expect(usage).toEqual([2 * one.usage!.completion_tokens]);
  // nothing left running on the server
  const load = await (await fetch(`${real.server.url}/metrics`)).text();
  expect(counterValue(load, "dispatch_ms_running_sequences")).toBe(0);
});

test("a batch of prompts: each prompt's greedy choices equal its own greedy request", async () => {
  const prompts = ["A river is", "The mountain"];
  const batch = await real.gw.client.completions.create({ model: real.model, prompt: prompts, n: 2, max_tokens: 8, temperature: 0 });
  const singles = await Promise.all(prompts.map((prompt) => real.gw.client.completions.create({ model: real.model, prompt, max_tokens: 8, temperature: 0 })));
  expect(batch.choices.map((c) => c.text)).toEqual(singles.flatMap((s) => [s.choices[0]!.text, s.choices[0]!.text]));
  expect(batch.usage!.prompt_tokens).toBe(singles.reduce((n, s) => n + s.usage!.prompt_tokens, 0));
  expect(batch.usage!.completion_tokens).toBe(2 * singles.reduce((n, s) => n + s.usage!.completion_tokens, 0));
});
