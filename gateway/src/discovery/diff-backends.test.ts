import { expect, test } from "bun:test";
import { diffBackends } from "./diff-backends";

const b = (id: string, url = `http://${id}:1`) => ({ id, url, kind: "dispatch" as const, source: "kubernetes" });

test("added, removed and moved backends", () => {
  expect(diffBackends([b("a"), b("b")], [b("b"), b("c")])).toEqual({ added: [b("c")], removed: ["a"] });
  expect(diffBackends([b("a")], [b("a", "http://10.0.0.9:1")])).toEqual({ added: [b("a", "http://10.0.0.9:1")], removed: ["a"] });
  expect(diffBackends([b("a")], [b("a")])).toEqual({ added: [], removed: [] });
});
