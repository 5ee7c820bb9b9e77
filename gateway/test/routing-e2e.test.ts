/**
 * Prefix- and load-aware routing end to end: three real model servers
 * (bundled tiny model, CPU) behind two in-process gateway replicas with
 * policy `dispatch` that share one real Redis. A long prompt's blocks, once
 * stored by the server that ran it, reach both replicas through that server's
 * KV events, so a request sharing the prefix goes there from either replica
 * (and the server reports the prefix as cached); a session key one replica
 * routed reaches the other through Redis, as does a stored Responses turn, whose
 * continuation (same prompt_cache_key) on the other replica goes to the server holding the conversation.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { testRedis } from "@dispatch/common/src/testing/redis";
import { type ModelServerHandle, startModelServer } from "../../test/support/model-server";
import type { AwareRouter } from "../src/workers/aware-router";
import { startGateway, type TestGateway } from "./start-gateway";

const BLOCK = 16;
let servers: ModelServerHandle[] = [];
let a: TestGateway;
let b: TestGateway;
let model = "";

const aware = (t: TestGateway) => t.gw.router as AwareRouter;

/** The backend a gateway's request log names for response `id`. */
function backendOf(t: TestGateway, id: string): string | undefined {
  t.gw.log.flush();
  for (const line of t.logs) {
    const e = JSON.parse(line) as { msg?: string; id?: string; backend?: string };
    if (e.msg === "request" && e.id === id) return e.backend;
  }
  return undefined;
}

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

beforeAll(async () => {
  const redis = await testRedis();
  servers = await Promise.all([0, 1, 2].map(() => startModelServer({ args: ["--block-size", String(BLOCK)] })));
  const config = {
    // Affinity beats any load difference here: this file checks what Redis shares, and on a busy
    // test machine the servers' measured step rates can differ by more than the default 20 ms slack.
    routing: { policy: "dispatch", affinity_slack_ms: 600_000 },
    redis: { url: redis.url },
    backends: servers.map((s, i) => ({ id: `ms-${i}`, kind: "dispatch", url: s.url })),
  };
  [a, b] = await Promise.all([startGateway(config, "k", { replicaId: "gw-a" }), startGateway(config, "k", { replicaId: "gw-b" })]);
  model = (await a.client.models.list()).data[0]!.id;
  for (const t of [a, b]) {
    expect(await aware(t).shared!.ready(5000)).toBe(true);
    expect(aware(t).core.backendIds().sort()).toEqual(["ms-0", "ms-1", "ms-2"]);
  }
}, 30_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await Promise.all(servers.map((s) => s.stop()));
});

test("a shared long prefix goes to the server holding it, from either replica", async () => {
  const words = ["river", "stone", "garden", "light", "window", "forest", "market", "silver", "harbor", "meadow"];
  const prefix = Array.from({ length: 240 }, (_, i) => words[(i * 7) % words.length]).join(" ");
  const complete = (t: TestGateway, tail: string) => t.client.completions.create({ model, prompt: `${prefix} ${tail}`, max_tokens: 2, temperature: 0 });

  const first = await complete(a, "and then the first");
  const warmed = backendOf(a, first.id)!;
  expect(warmed).toMatch(/^ms-\d$/);
  const promptTokens = first.usage!.prompt_tokens;
  expect(promptTokens).toBeGreaterThan(8 * BLOCK);
  // The server's KV events reach both replicas' indexes (exact mode).
  for (const t of [a, b]) await until("the warmed blocks in the index", () => aware(t).core.index.size(warmed) >= 8);

  const second = await complete(b, "and then a second");
  expect(backendOf(b, second.id)).toBe(warmed);
  const cached = second.usage!.prompt_tokens_details?.cached_tokens ?? 0;
  expect(cached % BLOCK).toBe(0);
  expect(cached).toBeGreaterThanOrEqual(8 * BLOCK);

  const third = await complete(a, "and a third one");
  expect(backendOf(a, third.id)).toBe(warmed);
  expect(third.usage!.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThanOrEqual(8 * BLOCK);
}, 20_000);

test("a session routed by one replica is known to the other through Redis", async () => {
  const key = `session-${crypto.randomUUID()}`;
  const r1 = await a.client.completions.create({ model, prompt: "the quiet harbor at night", max_tokens: 2, temperature: 0, prompt_cache_key: key } as never);
  const first = backendOf(a, r1.id)!;
  expect(first).toMatch(/^ms-\d$/);
  // Only Redis can tell replica b: it never saw this request, and the prompt is shorter than a block.
  const probe = { blockHashes: [], promptTokens: 6, blockSize: BLOCK, affinityKey: key };
  await until("the session in replica b's affinity table", () => aware(b).core.views(probe).some((v) => v.affine && v.id === first));
  expect(aware(b).shared!.stats().received).toBeGreaterThan(0);

  const r2 = await b.client.completions.create({ model, prompt: "a different opening line", max_tokens: 2, temperature: 0, prompt_cache_key: key } as never);
  expect(backendOf(b, r2.id)).toBe(first);
}, 20_000);

test("a Responses conversation continued on the other replica goes to the server holding its earlier turns", async () => {
  const words = ["river", "stone", "garden", "light", "window", "forest", "market", "silver", "harbor", "meadow"];
  const story = Array.from({ length: 200 }, (_, i) => words[(i * 3) % words.length]).join(" ");
  // the conversation's prompt_cache_key, as clients set one per conversation: its server is a session both replicas
  // know (through Redis), so the continuation's prefix is where it was computed whatever the servers' measured rates
  const key = `conversation-${crypto.randomUUID()}`;
  const first = await a.client.responses.create({ model, input: `${story} What comes next?`, max_output_tokens: 4, temperature: 0, prompt_cache_key: key }).withResponse();
  const warmed = backendOf(a, first.response.headers.get("x-request-id")!)!;
  expect(warmed).toMatch(/^ms-\d$/);
  const probe = { blockHashes: [], promptTokens: 6, blockSize: BLOCK, affinityKey: key };
  await until("the session in replica b's affinity table", () => aware(b).core.views(probe).some((v) => v.affine && v.id === warmed));
  // replica b reads the stored turn from Redis and renders the whole conversation: its prefix is on `warmed`
  const second = await b.client.responses.create({ model, previous_response_id: first.data.id, input: "And after that?", max_output_tokens: 4, temperature: 0, prompt_cache_key: key }).withResponse();
  expect(backendOf(b, second.response.headers.get("x-request-id")!)).toBe(warmed);
  expect(second.data.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(8 * BLOCK);
}, 20_000);
