import { expect, test } from "bun:test";
import { parseChatRequest } from "../openai/parse-chat";
import { parseCompletionRequest } from "../openai/parse-completion";
import { TEXT_BLOCK_BYTES, textRouteKey } from "./text-blocks";

const chat = (messages: { role: string; content: string }[]) => parseChatRequest(JSON.stringify({ model: "m", messages }));

test("prompts sharing a leading text share leading block hashes", () => {
  const system = { role: "system", content: "You answer questions about the harbor. ".repeat(10) };
  const a = textRouteKey(chat([system, { role: "user", content: "When does the ferry leave? ".repeat(6) }]));
  const b = textRouteKey(chat([system, { role: "user", content: "Where is the lighthouse? ".repeat(6) }]));
  const shared = Math.floor(("system\n".length + system.content.length) / TEXT_BLOCK_BYTES);
  expect(shared).toBeGreaterThan(3);
  expect(a.blockHashes.slice(0, shared)).toEqual(b.blockHashes.slice(0, shared));
  // Only full blocks are hashed; past the shared text they differ.
  expect(a.blockHashes[shared + 1]).toBeDefined();
  expect(a.blockHashes[shared + 1]).not.toBe(b.blockHashes[shared + 1]);
  expect(a.blockSize).toBe(16);
  // About 4 bytes per token.
  expect(a.promptTokens).toBe(Math.ceil(new TextEncoder().encode(`system\n${system.content}\0user\n${"When does the ferry leave? ".repeat(6)}\0`).length / 4));
});

test("the model salts the hashes; token-id prompts hash their ids", () => {
  const text = "x".repeat(200);
  const m1 = textRouteKey(parseCompletionRequest(JSON.stringify({ model: "m1", prompt: text })));
  const m2 = textRouteKey(parseCompletionRequest(JSON.stringify({ model: "m2", prompt: text })));
  expect(m1.blockHashes.length).toBe(3);
  expect(m1.blockHashes[0]).not.toBe(m2.blockHashes[0]);
  const ids = textRouteKey(parseCompletionRequest(JSON.stringify({ model: "m1", prompt: Array.from({ length: 40 }, (_, i) => i) })));
  expect(ids).toMatchObject({ promptTokens: 40, blockSize: 16 });
  expect(ids.blockHashes.length).toBe(2);
});

test("text blocks hash exactly as common hashBlocks does (indexes and replicas must agree)", () => {
  const { hashBlocks, rootHash } = require("@dispatch/common/src/block-hash") as typeof import("@dispatch/common/src/block-hash");
  const text = "Ünïcödé and ascii mixed — ".repeat(40);
  const k = textRouteKey(parseCompletionRequest(JSON.stringify({ model: "m1", prompt: text })));
  const bytes = new TextEncoder().encode(text);
  expect(k.blockHashes.length).toBe(Math.floor(bytes.length / TEXT_BLOCK_BYTES));
  expect(k.blockHashes).toEqual(hashBlocks(bytes, TEXT_BLOCK_BYTES, rootHash("text:m1")));
  // Twice: the cached root gives the same answer.
  expect(textRouteKey(parseCompletionRequest(JSON.stringify({ model: "m1", prompt: text }))).blockHashes).toEqual(k.blockHashes);
});
