import { expect, test } from "bun:test";
import { ANY_OBJECT } from "./json-schema";
import { JSON_START, jsonStart, MAX_WHITESPACE, stepJsonBytes, type JsonState } from "./json-state";

const enc = new TextEncoder();
const run = (text: string): JsonState | null => stepJsonBytes(JSON_START, enc.encode(text));

test("whole objects are done; every proper prefix of one is alive and not done", () => {
  const docs = [
    "{}",
    '{"a": 1}',
    '{"a": [1, -2.5e+3, 0, 0.25, true, false, null, "x\\"y\\\\z\\u00e9\\n"], "b": {"c": {}}, "d": []}',
    '{"κλειδί": "τιμή 🌍", "n": -0}',
    '{\n "pretty": [\n {"x": 1E5}\n ]\n}\n',
  ];
  for (const d of docs) {
    expect(JSON.parse(d)).toBeDefined();
    const bytes = enc.encode(d);
    let s: JsonState | null = JSON_START;
    for (let i = 0; i < bytes.length; i++) {
      s = s && stepJsonBytes(s, bytes.subarray(i, i + 1));
      expect(s, `${d} at ${i}`).not.toBeNull();
      const whole = new TextDecoder().decode(bytes.subarray(0, i + 1));
      let parses = false;
      try {
        parses = typeof JSON.parse(whole) === "object";
      } catch {}
      expect(s!.done, `${whole}`).toBe(parses);
    }
  }
});

test("what no JSON object can start with is refused", () => {
  for (const bad of [" {}", "\n{}", "[1]", '"x"', "1", '{"a" 1}', '{"a": 01}', '{"a": 1,}', "{,}", '{"a": tru}', '{"a": .5}', '{"a": 1.}', '{"a": -}', '{"a": "\\x"}', '{"a": "\\u12g4"}', '{"a": "line\nbreak"}', '{"a": 1]', '{"a": [1}', "{} {}", '{"a": 1}x', "{'a': 1}"]) {
    expect(run(bad), bad).toBeNull();
  }
});

test("whitespace runs are bounded", () => {
  expect(run(`{${" ".repeat(MAX_WHITESPACE)}}`)).not.toBeNull();
  expect(run(`{${" ".repeat(MAX_WHITESPACE + 1)}}`)).toBeNull();
  // inside strings, spaces are content
  expect(run(`{"a": "${" ".repeat(500)}"}`)!.done).toBe(true);
});

test("a reasoning model's thinking before the object: optional, or already open", () => {
  const may = (t: string) => stepJsonBytes(jsonStart(ANY_OBJECT, { thinking: "may" }), enc.encode(t));
  expect(may('<think>\nHm, {"no": 1} is not it.\n</think>\n\n{"a": 1}')?.done).toBe(true);
  expect(may('{"a": 1}')?.done).toBe(true); // no thinking at all
  expect(may("<thinx")).toBeNull();
  expect(may("<think>a</think>\n\n\n{")).toBeNull(); // whitespace after it is bounded too
  expect(may("<think>a</thin")?.done).toBe(false);
  const inside = (t: string) => stepJsonBytes(jsonStart(ANY_OBJECT, { thinking: "inside" }), enc.encode(t));
  expect(inside("so </th <> </think>{}")?.done).toBe(true);
  expect(inside("{}")?.done).toBe(false); // still thinking
  // with a tool call's tags: thinking, then the tags around the object
  const tagged = stepJsonBytes(jsonStart(ANY_OBJECT, { thinking: "may", prefix: "<tool_call>\n", suffix: "\n</tool_call>" }), enc.encode('<think>x</think>\n<tool_call>\n{"b": 2}\n</tool_call>'));
  expect(tagged?.done).toBe(true);
});
