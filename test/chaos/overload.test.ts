/**
 * Quick (CI). Beyond capacity: the gateway answers 429/503 with Retry-After (its own
 * max_in_flight, or the model server's RESOURCE_EXHAUSTED after retries); the
 * model server queues or refuses and its memory stays bounded; with a tiny KV
 * cache the server preempts and every sequence still completes with exactly
 * the tokens it produces alone (greedy).
 */
import { afterEach, expect, test } from "bun:test";
import { type Cluster, startCluster } from "../support/cluster";
import { scrapeMetrics, sumOf } from "../support/metrics";
import { waitFor } from "../support/ports";
import { chat } from "../support/sse-client";
import { burst } from "./overload";

let c: Cluster | undefined;
afterEach(async () => {
  await c?.stop();
  c = undefined;
});

const MiB = 1024;

test("gateway max_in_flight: excess requests get 429 with Retry-After, the rest complete", async () => {
  c = await startCluster({ servers: 1, gatewayEnv: { DISPATCH_SERVER_MAX_IN_FLIGHT: "4" } });
  const r = await burst(c, { concurrency: 24, maxTokens: 24 });
  console.log(JSON.stringify({ scenario: "overload-gateway-limit", tally: r.tally, retryAfterMissing: r.retryAfterMissing }));
  expect((r.tally.byStatus["200"] ?? 0) + (r.tally.byStatus["429"] ?? 0)).toBe(r.tally.total);
  expect(r.tally.byStatus["429"] ?? 0).toBeGreaterThan(0);
  expect(r.tally.byKind.ok).toBe(r.tally.byStatus["200"]!);
  expect(r.retryAfterMissing).toBe(0);
}, 60_000);

test("model server full (--max-num-seqs 2 --max-queue 2): RESOURCE_EXHAUSTED becomes 429 with Retry-After; memory bounded; still serving", async () => {
  c = await startCluster({ servers: 1, serverArgs: ["--max-num-seqs", "2", "--max-queue", "2"] });
  const r = await burst(c, { concurrency: 32, maxTokens: 24 });
  const m = await scrapeMetrics(c.servers[0]!.url);
  console.log(
    JSON.stringify({
      scenario: "overload-server-limit",
      tally: r.tally,
      retryAfterMissing: r.retryAfterMissing,
      rssBeforeMiB: Math.round(r.rssBeforeKiB / MiB),
      peakRssMiB: Math.round(r.peakRssKiB / MiB),
      serverOutcomes: Object.fromEntries([...m].filter(([k]) => k.startsWith("dispatch_ms_requests_total"))),
    }),
  );
  const refused = (r.tally.byStatus["429"] ?? 0) + (r.tally.byStatus["503"] ?? 0);
  expect(refused).toBeGreaterThan(0);
  expect((r.tally.byStatus["200"] ?? 0) + refused).toBe(r.tally.total);
  expect(r.retryAfterMissing).toBe(0);
  expect(r.peakRssKiB - r.rssBeforeKiB).toBeLessThan(256 * MiB);
  expect(c.servers[0]!.process.alive()).toBe(true);
  const after = await chat(c.gateway.url, { model: c.model, messages: [{ role: "user", content: "still there?" }], max_tokens: 4, stream: true });
  expect(after.kind).toBe("ok");
}, 60_000);

test("KV exhaustion (--kv-blocks 12): sequences are preempted and all complete with their solo greedy output; blocks return", async () => {
  c = await startCluster({ servers: 1, serverArgs: ["--kv-blocks", "12", "--max-num-seqs", "8", "--max-queue", "64"] });
  const cl = c;
  const body = (n: number) => ({
    model: cl.model,
    messages: [{ role: "user", content: `prompt number ${n}: name the words that come to mind` }],
    max_tokens: 40,
    ignore_eos: true,
    temperature: 0,
    stream: true,
  });
  const solo: string[] = [];
  for (let n = 0; n < 8; n++) {
    const r = await chat(cl.gateway.url, body(n));
    if (r.kind !== "ok") throw new Error(`solo request ${n}: ${JSON.stringify(r)}`);
    solo.push(r.content);
  }
  const m0 = await scrapeMetrics(cl.servers[0]!.url);
  const r = await burst(cl, { concurrency: 8, maxTokens: 40, body });
  const m1 = await scrapeMetrics(cl.servers[0]!.url);
  const computed = sumOf(m1, "dispatch_ms_batch_size_tokens_sum") - sumOf(m0, "dispatch_ms_batch_size_tokens_sum");
  const prompts = sumOf(m1, "dispatch_ms_prompt_tokens_total") - sumOf(m0, "dispatch_ms_prompt_tokens_total");
  const cached = sumOf(m1, "dispatch_ms_prompt_cached_tokens_total") - sumOf(m0, "dispatch_ms_prompt_cached_tokens_total");
  console.log(JSON.stringify({ scenario: "kv-exhaustion", tally: r.tally, tokensComputed: computed, promptTokens: prompts, cachedPromptTokens: cached, generated: 8 * 40 }));
  expect(r.tally.byKind.ok).toBe(8);
  // Without preemption the server computes at most every prompt token plus every generated one; recompute shows as more.
  expect(computed).toBeGreaterThan(prompts + 8 * 40);
  const contents = r.outcomes.map((x) => (x.kind === "ok" ? x.content : "")).sort();
  expect(contents).toEqual([...solo].sort());
  expect(await waitFor(async () => (await scrapeMetrics(cl.servers[0]!.url)).get("dispatch_ms_kv_blocks_used") === 0, 2000)).toBe(true);
}, 90_000);

test("every backend down: 503 in OpenAI's shape with Retry-After, at once", async () => {
  c = await startCluster({ servers: 1 });
  await c.servers[0]!.kill();
  const cl = c;
  expect(await waitFor(async () => (await cl.gateway.readyz()).backends.every((b) => !b.healthy), 3000)).toBe(true);
  const r = await chat(cl.gateway.url, { model: cl.model, messages: [{ role: "user", content: "anyone?" }], max_tokens: 2, stream: true }, { stallMs: 5000 });
  console.log(JSON.stringify({ scenario: "all-backends-down", outcome: r }));
  expect(r.kind).toBe("http-error");
  if (r.kind === "http-error") {
    expect(r.status).toBe(503);
    expect(r.retryAfter).not.toBeNull();
    expect((r.body as { error?: { code?: string } }).error?.code).toBe("upstream_unavailable");
    expect(r.ms).toBeLessThan(2000);
  }
}, 30_000);
