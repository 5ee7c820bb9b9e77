import { expect, test } from "bun:test";
import { JSON_START, MAX_WHITESPACE, stepJsonBytes, type JsonState } from "./json-state";

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
