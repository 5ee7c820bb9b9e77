/**
 * The Responses API over a real model server (the bundled tiny model on the CPU backend), with the official openai
 * client: a greedy response is the greedy chat completion of the same messages, token for token and in its usage;
 * a conversation continued through `previous_response_id` is the chat completion of the whole conversation (the
 * stored turns rendered as the chat template would render them) and starts from the server's cached prompt blocks;
 * streamed deltas add up to the same text.
 */
import { expect, test } from "bun:test";
import { useRealModelServer } from "./real-model-server";

const real = useRealModelServer();

test("a greedy response is the greedy chat completion; a continued one, the chat of the whole conversation", async () => {
  const { client } = real.gw;
  const model = real.model;
  const q1 = "Tell me about the rivers of the north and the mountains they come from.";
  const q2 = "And the sea they run to?";
  const first = await client.responses.create({ model, input: q1, temperature: 0, max_output_tokens: 24 });
  const chat1 = await client.chat.completions.create({ model, messages: [{ role: "user", content: q1 }], temperature: 0, max_completion_tokens: 24 });
  expect(first.output_text).toBe(chat1.choices[0]!.message.content!);
  expect(first.usage!.input_tokens).toBe(chat1.usage!.prompt_tokens);
  expect(first.usage!.output_tokens).toBe(chat1.usage!.completion_tokens);
  expect(first.status).toBe(chat1.choices[0]!.finish_reason === "length" ? "incomplete" : "completed");

  const second = await client.responses.create({ model, previous_response_id: first.id, input: q2, temperature: 0, max_output_tokens: 24 });
  const chat2 = await client.chat.completions.create({
    model,
    messages: [
      { role: "user", content: q1 },
      { role: "assistant", content: first.output_text },
      { role: "user", content: q2 },
    ],
    temperature: 0,
    max_completion_tokens: 24,
  });
  expect(second.output_text).toBe(chat2.choices[0]!.message.content!);
  expect(second.usage!.input_tokens).toBe(chat2.usage!.prompt_tokens);
  // the conversation's earlier turns were in the server's prefix cache
  expect(second.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(0);

  let streamed = "";
  const stream = client.responses.stream({ model, previous_response_id: first.id, input: q2, temperature: 0, max_output_tokens: 24 });
  for await (const e of stream) if (e.type === "response.output_text.delta") streamed += e.delta;
  expect(streamed).toBe(second.output_text);
  expect((await stream.finalResponse()).output_text).toBe(second.output_text);
});
