import { expect, test } from "bun:test";
import { createToolCallParser, templateHasToolCalls, type ToolCall } from "./tool-calls";

const ids = () => {
  let n = 0;
  return () => `call_${n++}`;
};

/** Feed `text` in pieces of `size` characters, then finish; the content and calls in all. */
function run(text: string, size: number) {
  const p = createToolCallParser(ids());
  let content = "";
  const calls: ToolCall[] = [];
  for (let i = 0; i < text.length; i += size) {
    const r = p.push(text.slice(i, i + size));
    content += r.content;
    calls.push(...r.calls);
  }
  const f = p.finish();
  return { content: content + f.content, calls: [...calls, ...f.calls] };
}

const weather = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>';

test("content and calls come out the same whatever the pieces the text arrives in", () => {
  const text = `Let me check both.\n${weather}\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>\n`;
  for (const size of [1, 2, 3, 7, 11, 1000]) {
    expect(run(text, size)).toEqual({
      content: "Let me check both.\n",
      calls: [
        { id: "call_0", name: "get_weather", arguments: '{"city":"Paris","unit":"c"}' },
        { id: "call_1", name: "get_time", arguments: "{}" },
      ],
    });
  }
});

test("text without calls passes through, a marker's first characters are held only while they could be one", () => {
  const p = createToolCallParser(ids());
  expect(p.push("a <tool")).toEqual({ content: "a ", calls: [] });
  expect(p.push("s> and <")).toEqual({ content: "<tools> and ", calls: [] });
  expect(p.finish()).toEqual({ content: "<", calls: [] });
  expect(run("plain text, no calls", 3)).toEqual({ content: "plain text, no calls", calls: [] });
});

test("what is not a call stays content: bad JSON, no name, an unterminated block", () => {
  expect(run("<tool_call>not json</tool_call> after", 4)).toEqual({ content: "<tool_call>not json</tool_call> after", calls: [] });
  expect(run('<tool_call>{"arguments": {}}</tool_call>', 5).calls).toEqual([]);
  expect(run('x <tool_call>{"name": "f", "argu', 3)).toEqual({ content: 'x <tool_call>{"name": "f", "argu', calls: [] });
});

test("arguments given as a string or as `parameters`; content after a call is kept, whitespace is not", () => {
  expect(run('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', 4).calls[0]!.arguments).toBe('{"a": 1}');
  expect(run('<tool_call>{"name": "f", "parameters": {"a": 1}}</tool_call>', 4).calls[0]!.arguments).toBe('{"a":1}');
  expect(run(`${weather}\n\nDone.`, 3).content).toBe("\n\nDone.");
  expect(run(`${weather}\n \n`, 2).content).toBe("");
});

test("the templates that announce Hermes tool calls", () => {
  expect(templateHasToolCalls("... <tool_call>\n{...}\n</tool_call> ...")).toBe(true);
  expect(templateHasToolCalls("{% for message in messages %}{{ message.content }}{% endfor %}")).toBe(false);
});
