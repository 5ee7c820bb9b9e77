import { expect, test } from "bun:test";
import { createReasoningSplitter, promptOpensReasoning, templateHasReasoning } from "./reasoning";

function run(text: string, size: number, startInside = false) {
  const s = createReasoningSplitter(startInside);
  let reasoning = "";
  let content = "";
  for (let i = 0; i < text.length; i += size) {
    const r = s.push(text.slice(i, i + size));
    reasoning += r.reasoning;
    content += r.content;
  }
  const f = s.finish();
  return { reasoning: reasoning + f.reasoning, content: content + f.content };
}

test("thinking and answer come apart the same whatever the pieces", () => {
  const text = "<think>\nThe user says hi.\n\nGreet back.\n</think>\n\nHello! How can I help?";
  for (const size of [1, 2, 5, 9, 1000]) {
    expect(run(text, size)).toEqual({ reasoning: "The user says hi.\n\nGreet back.", content: "Hello! How can I help?" });
  }
});

test("a prompt that opened the block: the generation starts inside it", () => {
  expect(run("Think first.\n</think>\n\nAnswer.", 3, true)).toEqual({ reasoning: "Think first.", content: "Answer." });
  expect(promptOpensReasoning("<|im_start|>assistant\n<think>\n")).toBe(true);
  expect(promptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(false);
});

test("no block at the start: all content, a later <think> included; an unfinished block is all reasoning", () => {
  expect(run("Hello <think>not thinking</think>", 2)).toEqual({ reasoning: "", content: "Hello <think>not thinking</think>" });
  expect(run("<thin", 2)).toEqual({ reasoning: "", content: "<thin" });
  expect(run("<think>\nstill going when the length ran ou", 4)).toEqual({ reasoning: "still going when the length ran ou", content: "" });
  expect(run("<think></think>Just the answer.", 3)).toEqual({ reasoning: "", content: "Just the answer." });
});

test("the templates that announce thinking", () => {
  expect(templateHasReasoning("{% if enable_thinking is false %}<think>\n\n</think>{% endif %}")).toBe(true);
  expect(templateHasReasoning("{{ message.content }}")).toBe(false);
});
