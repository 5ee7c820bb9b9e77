/**
 * Quick (CI) cut of the fault suite, a few seconds each: kill 1 of 2 model
 * servers under load, and a peer that hangs, answers 5xx, or cuts a stream
 * (seen through the official `openai` client). The full runs
 * (4 servers, slow and dropping peers, overload, KV exhaustion, Redis) are
 * the `*.chaos.ts` files, run by `npm run test:chaos`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI, { APIError } from "openai";
import { type Cluster, startCluster } from "../support/cluster";
import { faultyPeerScenario } from "./faulty-peer";
import { killServerScenario } from "./kill-server";

test("kill 1 of 2 servers under load: no HTTP error, no hang, one SSE error per cut stream, eject < 1 s, return", async () => {
  const r = await killServerScenario({ servers: 2, concurrency: 4, loadMs: 3000, maxTokens: 24 });
  console.log(JSON.stringify({ scenario: "kill-1-of-2", tally: r.tally, ejectMs: Math.round(r.ejectMs), returnMs: Math.round(r.returnMs), servedAfterReturn: r.servedAfterReturn }));
  expect(r.tally.byKind["http-error"] ?? 0).toBe(0);
  expect(r.tally.byKind.hang ?? 0).toBe(0);
  expect(r.tally.byKind.broken ?? 0).toBe(0);
  for (const s of r.streamErrors) if (s.kind === "sse-error") expect(s.errorEvents).toBe(1);
  expect(r.ejectMs).toBeLessThan(1000);
  expect(r.returnMs).toBeLessThan(2000);
  expect(r.servedAfterReturn).toBeGreaterThan(0);
}, 40_000);

describe("faulty peer (1 of 2)", () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster({ servers: 2, proxies: true });
  }, 30_000);
  afterAll(async () => {
    await c?.stop();
  });

  test("hang: requests sent to it are retried elsewhere once it is ejected; nothing hangs", async () => {
    const r = await faultyPeerScenario(c, { mode: "hang" }, { concurrency: 4, loadMs: 1500, stallMs: 6000 });
    expect(r.tally.byKind.ok).toBe(r.tally.total);
    expect(r.ejected).toBe(true);
    expect(r.returned).toBe(true);
  }, 30_000);

  test("5xx: every request succeeds on the other server", async () => {
    const r = await faultyPeerScenario(c, { mode: "error", status: 503 }, { concurrency: 4, loadMs: 1500 });
    expect(r.tally.byKind.ok).toBe(r.tally.total);
    expect(r.ejected).toBe(true);
    expect(r.returned).toBe(true);
  }, 30_000);

  test("drop mid-stream: the official openai client gets the content so far, then an APIError (no hang, no silent end)", async () => {
    // Both servers cut their streams, so whichever is chosen, the stream breaks after the first chunks.
    for (const p of c.proxies) p.setFault({ mode: "drop", dropAfterChunks: 3 });
    const client = new OpenAI({ baseURL: `${c.gateway.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 10_000 });
    let content = "";
    let error: unknown;
    try {
      const stream = await client.chat.completions.create({ model: c.model, messages: [{ role: "user", content: "tell me a long story" }], max_tokens: 64, stream: true });
      for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? "";
    } catch (err) {
      error = err;
    } finally {
      for (const p of c.proxies) p.setFault({ mode: "pass" });
    }
    expect(error).toBeInstanceOf(APIError);
    expect(content.length).toBeGreaterThan(0);
  }, 30_000);
});
