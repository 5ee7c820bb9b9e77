/**
 * Prefix- and load-aware routing over OpenAI-HTTP backends (vLLM-like fakes):
 * the approximate index learns the prompt's text blocks from what was routed,
 * so a conversation sharing a long head follows the first request; the
 * backends' vLLM gauges reach the router through their /metrics.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { AwareRouter } from "../src/workers/aware-router";
import { type OpenAIFake, startOpenAIFake } from "./fakes/openai-fake";
import { startGateway, type TestGateway } from "./start-gateway";

let p: OpenAIFake;
let q: OpenAIFake;
let t: TestGateway;

beforeAll(async () => {
  p = startOpenAIFake();
  q = startOpenAIFake();
  p.metrics = { running: 2, waiting: 1 };
  q.metrics = { running: 0, waiting: 0 };
  t = await startGateway({
    routing: { policy: "dispatch" },
    backends: [
      { id: "p", kind: "openai", url: p.url },
      // An explicit metrics_url wins over the derived one.
      { id: "q", kind: "openai", url: `${q.url}/`, metrics_url: `${q.url.replace(/\/v1$/, "")}/metrics` },
    ],
  });
});
afterAll(async () => {
  await t.stop();
  p.stop();
  q.stop();
});

const router = () => t.gw.router as AwareRouter;

test("vLLM gauges from /metrics reach the router", async () => {
  const req = { blockHashes: [], promptTokens: 1, blockSize: 16 };
  const end = Date.now() + 3000;
  while (router().core.views(req).some((v) => !v.load) && Date.now() < end) await Bun.sleep(10);
  const load = Object.fromEntries(router().core.views(req).map((v) => [v.id, v.load]));
  expect(load.p).toMatchObject({ running: 2, waiting: 1, kvBlocksUsed: 500, kvBlocksTotal: 1000 });
  expect(load.q).toMatchObject({ running: 0, waiting: 0 });
});

test("a conversation's long head follows its first request (approximate index)", async () => {
  const system = { role: "system" as const, content: "You are the harbor master's assistant. ".repeat(40) };
  const ask = async (content: string) => {
    const before = [p.bodies.length, q.bodies.length];
    await t.client.chat.completions.create({ model: "upstream-model", messages: [system, { role: "user", content }] });
    return p.bodies.length > before[0]! ? "p" : q.bodies.length > before[1]! ? "q" : "none";
  };
  const first = await ask("When does the ferry leave?");
  expect(first).not.toBe("none");
  expect(router().core.index.size(first)).toBeGreaterThan(20);
  for (const content of ["Where is the lighthouse?", "Is the fish market open today?", "How deep is the channel?"]) expect(await ask(content)).toBe(first);
});
