import { expect, test } from "bun:test";
import type { Item } from "./items";
import { ChainTooLong, createMemoryStore, history, ResponseNotFound, type StoredResponse } from "./store";

const msg = (text: string): Item => ({ type: "message", role: "user", content: [{ type: "input_text", text }] });
const rec = (id: string, previous: string | null, owner = ""): StoredResponse => ({ owner, previous, input: [msg(`in ${id}`)], response: { id, output: [msg(`out ${id}`)] } });

test("memory store: the oldest go first past max_entries; a record expires after ttl_s", async () => {
  let now = 0;
  const s = createMemoryStore({ maxEntries: 2, maxBytes: 1 << 20, ttlS: 10, now: () => now });
  for (const id of ["a", "b", "c"]) await s.put(rec(id, null));
  expect(await s.get("a")).toBeUndefined();
  expect((await s.get("b"))?.response.id).toBe("b");
  now = 10_000;
  expect(await s.get("c")).toBeUndefined();
  expect(await s.delete("c")).toBe(false);
});

test("memory store: bounded in bytes too (the oldest out first; one larger than the bound is not kept)", async () => {
  const s = createMemoryStore({ maxEntries: 100, maxBytes: 400, ttlS: 10 });
  const size = JSON.stringify(rec("a", null)).length;
  for (const id of ["a", "b", "c", "d"]) await s.put(rec(id, null));
  const kept = Math.floor(400 / size);
  for (const [i, id] of ["a", "b", "c", "d"].entries()) expect((await s.get(id)) !== undefined).toBe(i >= 4 - kept);
  const big = rec("big", null);
  big.input = [msg("x".repeat(500))];
  await s.put(big);
  expect(await s.get("big")).toBeUndefined();
});

test("history walks previous links back, oldest first; a missing link, another owner or a long chain throws", async () => {
  const s = createMemoryStore({ maxEntries: 100, maxBytes: 1 << 20, ttlS: 100 });
  await s.put(rec("r1", null));
  await s.put(rec("r2", "r1"));
  await s.put(rec("r3", "r2"));
  const items = await history(s, "r3", "", 10);
  expect(items.map((i) => (i.content as { text: string }[])[0]!.text)).toEqual(["in r1", "out r1", "in r2", "out r2", "in r3", "out r3"]);
  await expect(history(s, "r3", "someone", 10)).rejects.toBeInstanceOf(ResponseNotFound);
  await expect(history(s, "r3", "", 2)).rejects.toBeInstanceOf(ChainTooLong);
  await s.delete("r1");
  await expect(history(s, "r3", "", 10)).rejects.toThrow("Response with id 'r1' not found.");
});
