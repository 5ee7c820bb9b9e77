import { expect, test } from "bun:test";
import { createOutputBuilder } from "./output-builder";

const base = { id: "resp_x", object: "response", created_at: 1, model: "m" };
const delta = (d: Record<string, unknown>, finish: string | null = null, logprobs: unknown = null) => ({ choices: [{ index: 0, delta: d, logprobs, finish_reason: finish }] });

test("a call whose arguments come in pieces (vLLM streams them so): one item, a delta per piece, the whole at done", () => {
  const b = createOutputBuilder(base);
  const ev = [
    ...b.start(),
    ...b.chunk(delta({ role: "assistant", content: "" })),
    ...b.chunk(delta({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "" } }] })),
    ...b.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: '{"a"' } }] })),
    ...b.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: ": 1}" } }] })),
    ...b.chunk(delta({ tool_calls: [{ index: 1, id: "call_2", type: "function", function: { name: "g", arguments: "{}" } }] })),
    ...b.chunk(delta({}, "tool_calls")),
    ...b.chunk({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12, prompt_tokens_details: { cached_tokens: 4 } } }),
    ...b.end(),
  ];
  expect(ev.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => e.delta)).toEqual(['{"a"', ": 1}", "{}"]);
  expect(ev.filter((e) => e.type === "response.function_call_arguments.done").map((e) => e.arguments)).toEqual(['{"a": 1}', "{}"]);
  expect(b.response.output).toMatchObject([
    { type: "function_call", call_id: "call_1", name: "f", arguments: '{"a": 1}', status: "completed" },
    { type: "function_call", call_id: "call_2", name: "g", arguments: "{}", status: "completed" },
  ]);
  expect(b.response.usage).toEqual({ input_tokens: 5, input_tokens_details: { cached_tokens: 4 }, output_tokens: 7, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 12 });
  expect(ev.map((e) => e.sequence_number)).toEqual(ev.map((_, i) => i));
  expect(ev.at(-1)!.type).toBe("response.completed");
});

test("vLLM's `reasoning` field, content logprobs, and text after a call opening a new message", () => {
  const lp = { content: [{ token: "Hi", logprob: -0.5, bytes: [72, 105], top_logprobs: [{ token: "Hi", logprob: -0.5, bytes: null }] }] };
  const b = createOutputBuilder(base);
  b.start();
  b.chunk(delta({ reasoning: "hmm" }));
  b.chunk(delta({ content: "Hi" }, null, lp));
  b.chunk(delta({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: "{}" } }] }));
  b.chunk(delta({ content: " more" }, "stop"));
  b.end();
  const out = b.response.output as Record<string, unknown>[];
  expect(out.map((o) => o.type)).toEqual(["reasoning", "message", "function_call", "message"]);
  expect(out[0]).toMatchObject({ content: [{ type: "reasoning_text", text: "hmm" }] });
  expect(out[1]).toMatchObject({ content: [{ text: "Hi", logprobs: [{ token: "Hi", logprob: -0.5, bytes: [72, 105], top_logprobs: [{ token: "Hi", bytes: [] }] }] }] });
  expect(out[3]).toMatchObject({ content: [{ text: " more" }] });
});

test("a stream that ends without a finish reason fails the response, as does an error payload", () => {
  const cut = createOutputBuilder(base);
  cut.start();
  cut.chunk(delta({ content: "par" }));
  const ev = cut.end();
  expect(ev.map((e) => e.type)).toEqual(["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.failed", "error"]);
  expect(cut.response).toMatchObject({ status: "failed", error: { code: "server_error" }, output: [{ status: "incomplete" }] });

  const err = createOutputBuilder(base);
  err.start();
  err.chunk({ error: { message: "boom", type: "server_error", code: "upstream_error", param: null } });
  expect(err.end().at(-1)).toMatchObject({ type: "error", message: "boom", code: "upstream_error" });
});

test("a whole chat completion: content with calls, each call its own item", () => {
  const b = createOutputBuilder(base);
  b.completion({
    choices: [
      {
        message: { role: "assistant", content: "ok", tool_calls: [{ id: "a", type: "function", function: { name: "f", arguments: "{}" } }, { id: "b", type: "function", function: { name: "g", arguments: "[]" } }] },
        finish_reason: "tool_calls",
      },
    ],
    usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
  });
  b.end();
  expect(b.response.status).toBe("completed");
  expect((b.response.output as { type: string; call_id?: string }[]).map((o) => o.call_id ?? o.type)).toEqual(["message", "a", "b"]);
});
