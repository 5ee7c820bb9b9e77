import { expect, test } from "bun:test";
import { createMessageBuilder } from "./message-builder";

const delta = (d: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) => ({ choices: [{ index: 0, delta: d, finish_reason: finish, ...extra }] });

test("tool arguments in pieces: input_json_delta per piece, the block's input the parsed whole; usage split by the cache", () => {
  const b = createMessageBuilder({ id: "msg_x", model: "m", stopSequences: [] });
  const ev = [
    ...b.start(10),
    ...b.chunk(delta({ content: "ok" })),
    ...b.chunk(delta({ tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: '{"a"' } }] })),
    ...b.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: ": 1}" } }] })),
    ...b.chunk(delta({}, "tool_calls")),
    ...b.chunk({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 8 } } }),
    ...b.end(),
  ];
  expect(ev.filter((e) => e.type === "content_block_delta").map((e) => e.delta)).toEqual([
    { type: "text_delta", text: "ok" },
    { type: "input_json_delta", partial_json: '{"a"' },
    { type: "input_json_delta", partial_json: ": 1}" },
  ]);
  expect(b.message).toMatchObject({
    stop_reason: "tool_use",
    content: [{ type: "text", text: "ok" }, { type: "tool_use", id: "call_1", name: "f", input: { a: 1 } }],
    usage: { input_tokens: 2, cache_read_input_tokens: 8, output_tokens: 5 },
  });
  expect(ev.map((e) => e.type).slice(-2)).toEqual(["message_delta", "message_stop"]);
});

test("stop_reason: a named stop string that is one of the request's is stop_sequence; else end_turn; length max_tokens", () => {
  const run = (finish: string, extra: Record<string, unknown>) => {
    const b = createMessageBuilder({ id: "m", model: "m", stopSequences: ["END"] });
    b.chunk(delta({ content: "x" }, finish, extra));
    b.end();
    return [b.message.stop_reason, b.message.stop_sequence];
  };
  expect(run("stop", { stop_reason: "END" })).toEqual(["stop_sequence", "END"]);
  expect(run("stop", { stop_reason: 151645 })).toEqual(["end_turn", null]);
  expect(run("stop", {})).toEqual(["end_turn", null]);
  expect(run("length", {})).toEqual(["max_tokens", null]);
});

test("a stream without a finish, or an error payload: one error event", () => {
  const b = createMessageBuilder({ id: "m", model: "m", stopSequences: [] });
  b.chunk(delta({ content: "x" }));
  expect(b.end().at(-1)).toEqual({ type: "error", error: { type: "api_error", message: "The upstream stream ended before the message finished." } });
});
