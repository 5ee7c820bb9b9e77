import { expect, test } from "bun:test";
import { GatewayError } from "../errors";
import { parseChatRequest } from "./parse-chat";
import { parseCompletionRequest } from "./parse-completion";

const chat = (o: Record<string, unknown>) => parseChatRequest(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], ...o }));

test("normalizes every supported field", () => {
  const r = chat({
    messages: [
      { role: "developer", content: "d" },
      { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }], name: "u" },
      { role: "assistant", content: null, tool_calls: [{ id: "1" }] },
      { role: "tool", content: "r", tool_call_id: "1" },
    ],
    max_tokens: 10,
    max_completion_tokens: 20,
    temperature: 0.2,
    top_p: 0.9,
    seed: 3,
    stop: "x",
    stream: true,
    stream_options: { include_usage: true },
    user: "me",
    prompt_cache_key: "session-1",
    n: 1,
  });
  expect(r.messages!.map((m) => m.content)).toEqual(["d", "a\nb", "", "r"]);
  expect(r.maxTokens).toBe(20);
  expect(r.stop).toEqual(["x"]);
  expect(r.includeUsage).toBe(true);
  expect(r.affinityKey).toBe("session-1");
  expect(r.sampling).toMatchObject({ temperature: 0.2, topP: 0.9, seed: 3 });
  expect(r.passthroughOnly).toEqual([]);
});

test("bad input names the parameter", () => {
  const bad: [Record<string, unknown>, string][] = [
    [{ n: 0 }, "n"],
    [{ logit_bias: { "-1": 5 } }, "logit_bias"],
    [{ logit_bias: { "12": 101 } }, "logit_bias"],
    [{ logit_bias: { x: 1 } }, "logit_bias"],
    [{ logit_bias: [1] }, "logit_bias"],
    [{ n: 129 }, "n"],
    [{ n: 2.5 }, "n"],
    [{ stop: [1] }, "stop"],
    [{ stop: "" }, "stop"],
    [{ messages: "hi" }, "messages"],
    [{ messages: [{ role: "tool", content: "x" }] }, "messages[0].tool_call_id"],
    [{ messages: [{ role: "user" }] }, "messages[0].content"],
    [{ presence_penalty: 5 }, "presence_penalty"],
    [{ stream: "yes" }, "stream"],
  ];
  for (const [patch, param] of bad) {
    try {
      chat(patch);
      throw new Error(`accepted ${JSON.stringify(patch)}`);
    } catch (err) {
      expect(err).toBeInstanceOf(GatewayError);
      expect((err as GatewayError).status).toBe(400);
      expect((err as GatewayError).param).toBe(param);
    }
  }
});

test("completions: string, token ids, batches of either", () => {
  const c = (prompt: unknown) => parseCompletionRequest(JSON.stringify({ model: "m", prompt }));
  const p = (prompt: unknown) => c(prompt).prompt;
  expect(p("x")).toBe("x");
  expect(p([1, 2])).toEqual([1, 2]);
  expect(p(["y"])).toBe("y");
  expect(c(["y"]).batch).toBeUndefined();
  expect(c(["a", "b"])).toMatchObject({ prompt: "a", batch: ["a", "b"] });
  expect(c([[1, 2], "b"]).batch).toEqual([[1, 2], "b"]);
  for (const bad of [[], [1, "a"], [["a"]], [[1.5]], Array(257).fill("x")]) expect(() => c(bad)).toThrow(GatewayError);
  // n choices; best_of equal to n asks for nothing more, above it only an OpenAI-HTTP backend can rank, below it is a 400
  const cx = (o: Record<string, unknown>) => parseCompletionRequest(JSON.stringify({ model: "m", prompt: "x", ...o }));
  expect(cx({}).n).toBe(1);
  expect(cx({ n: 3, best_of: 3 })).toMatchObject({ n: 3, passthroughOnly: [] });
  expect(cx({ best_of: 2 }).passthroughOnly).toEqual(["best_of"]);
  expect(() => cx({ n: 3, best_of: 2 })).toThrow(GatewayError);
  expect(chat({ n: 4 }).n).toBe(4);
  expect(chat({ logit_bias: { "50256": -100, "7": 2.5 } }).sampling.logitBias).toEqual({ 50256: -100, 7: 2.5 });
  expect(chat({ logit_bias: {} }).sampling.logitBias).toBeUndefined();
});
