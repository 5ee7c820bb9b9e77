import { describe, expect, test } from "bun:test";
import { createStopMatcher } from "./stop-matcher";

function run(stops: string[], pieces: string[]) {
  const m = createStopMatcher(stops);
  let out = "";
  for (const p of pieces) {
    const r = m.push(p);
    out += r.text;
    if (r.stopped) return { out, stopped: true };
  }
  return { out: out + m.flush(), stopped: false };
}

describe("stop matcher", () => {
  test("no stop strings: text passes through", () => {
    expect(run([], ["a", "b"])).toEqual({ out: "ab", stopped: false });
  });
  test("a stop string inside one piece", () => {
    expect(run(["END"], ["abcENDdef"])).toEqual({ out: "abc", stopped: true });
  });
  test("a stop string spanning three pieces", () => {
    expect(run(["</stop>"], ["hello </", "st", "op> tail"])).toEqual({ out: "hello ", stopped: true });
  });
  test("a held prefix that does not complete is released", () => {
    const m = createStopMatcher(["abc"]);
    expect(m.push("xab")).toEqual({ text: "x", stopped: false });
    expect(m.push("d")).toEqual({ text: "abd", stopped: false });
    expect(m.flush()).toBe("");
  });
  test("the held tail is flushed at the end", () => {
    expect(run(["abc"], ["xa", "b"])).toEqual({ out: "xab", stopped: false });
  });
  test("the earliest of several stop strings wins", () => {
    expect(run(["world", "lo w"], ["hel", "lo world"])).toEqual({ out: "hel", stopped: true });
  });
  test("one character at a time", () => {
    const text = "The answer is 42.\n\nQuestion:";
    expect(run(["\n\n"], [...text])).toEqual({ out: "The answer is 42.", stopped: true });
  });
  test("non-ASCII stop strings", () => {
    expect(run(["🌍!"], ["hi 🌍", "!", " more"])).toEqual({ out: "hi ", stopped: true });
  });
});
