/**
 * Quick (CI): 700 generated malformed Connect calls (seeded) straight at a real
 * model server process: Connect error codes (never internal/unknown), no 5xx,
 * nothing stuck, and the server still answers Health and serves afterwards.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type ModelServerHandle, startModelServer } from "../support/model-server";
import { runConnectFuzz } from "./fuzz-run";

const SEED = Number(process.env.DISPATCH_FUZZ_SEED ?? 20261129);
let ms: ModelServerHandle;
beforeAll(async () => {
  ms = await startModelServer();
}, 30_000);
afterAll(async () => {
  await ms?.stop();
});

test("Connect API fuzz: Connect codes, no crash, nothing stuck, still serving", async () => {
  const { client, modelId, cases, report: r } = await runConnectFuzz(ms.url, { label: "connect", seed: SEED, count: 700, concurrency: 6, stuckMs: 8000, deadlineMs: 45_000 });
  const groups = new Map<string, number>();
  for (const f of r.failures) {
    const key = `${f.category} | ${f.what.slice(0, 30)} | ${f.problem} | ${JSON.stringify(f.answer)}`;
    groups.set(key, (groups.get(key) ?? 0) + 1);
  }
  for (const [k, n] of groups) console.log(`${n} x ${k}`);
  expect(r.sent).toBe(cases.length);
  expect(r.failures).toEqual([]);
  // The server decodes requests itself (rpc/request-guard.ts): a malformed message is never `internal`.
  expect(r.libraryInternal).toBe(0);
  expect(ms.process.alive()).toBe(true);
  expect((await client.health({})).status).toBeGreaterThan(0);
  let tokens = 0;
  for await (const step of client.generate({ requestId: "after-fuzz", model: modelId, promptTokenIds: [1, 2, 3], sampling: { temperature: 0 }, stop: { maxTokens: 3 } })) tokens += step.tokenIds.length;
  expect(tokens).toBeGreaterThan(0);
}, 60_000);
