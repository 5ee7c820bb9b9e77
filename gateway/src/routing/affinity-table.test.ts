import { expect, test } from "bun:test";
import { createAffinityTable } from "./affinity-table";

test("affinity table remembers the last backend per key, bounded LRU", () => {
  const t = createAffinityTable(2);
  t.set("u1", "a");
  t.set("u2", "b");
  t.set("u1", "c"); // refresh u1
  t.set("u3", "a"); // evicts u2
  expect(t.get("u1")).toBe("c");
  expect(t.get("u2")).toBeUndefined();
  expect(t.size).toBe(2);
  t.removeBackend("a");
  expect(t.get("u3")).toBeUndefined();
  expect(() => createAffinityTable(0)).toThrow(RangeError);
});
