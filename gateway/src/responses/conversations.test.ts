import { expect, test } from "bun:test";
import { createMemoryConversations } from "./conversations";
import type { Item } from "./items";

const msg = (id: string, text: string): Item => ({ id, type: "message", role: "user", content: [{ type: "input_text", text }] });

test("memory conversations: owned, appended in order, items deleted; bounded in size, the oldest out first", async () => {
  const s = createMemoryConversations({ maxEntries: 10, maxBytes: 1000 });
  const a = await s.create("me", {}, [msg("m1", "one")]);
  await s.append(a.id, [msg("m2", "two"), msg("m3", "three")]);
  expect(await s.get(a.id, "someone")).toBeUndefined();
  expect((await s.items(a.id)).map((i) => i.id)).toEqual(["m1", "m2", "m3"]);
  expect(await s.deleteItem(a.id, "m2")).toBe(true);
  expect(await s.deleteItem(a.id, "m2")).toBe(false);
  expect((await s.items(a.id)).map((i) => i.id)).toEqual(["m1", "m3"]);
  // a newer conversation past the bound pushes the oldest out
  const b = await s.create("me", {}, [msg("big", "x".repeat(900))]);
  expect(await s.get(a.id, "me")).toBeUndefined();
  expect((await s.get(b.id, "me"))?.id).toBe(b.id);
});
