/**
 * The harness itself: a model server behind a fault proxy and a gateway as real
 * processes; each fault mode changes what a client sees the way the proxy
 * promises, and everything started is gone afterwards.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Cluster, startCluster } from "./cluster";
import { chatBody } from "./load";
import { scrapeMetrics, sumOf } from "./metrics";
import { procStats, slope } from "./proc-stats";
import { chat } from "./sse-client";

let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ servers: 1, proxies: true, gatewayEnv: { DISPATCH_RETRY_MAX_ATTEMPTS: "1" } });
}, 30_000);
afterAll(async () => {
  await c?.stop();
  expect(c.servers[0]!.process.alive()).toBe(false);
  expect(c.gateway.process.alive()).toBe(false);
});

test("pass: a stream completes through gateway and proxy; the server counts it", async () => {
  const r = await chat(c.gateway.url, chatBody(c.model, 1, 8));
  expect(r.kind).toBe("ok");
  const m = await scrapeMetrics(c.servers[0]!.url);
  expect(sumOf(m, "dispatch_ms_requests_total")).toBeGreaterThanOrEqual(1);
});

test("drop: a stream cut by the proxy reaches the client as one SSE error event", async () => {
  c.proxies[0]!.setFault({ mode: "drop", dropAfterChunks: 3 });
  const r = await chat(c.gateway.url, chatBody(c.model, 2, 64), { stallMs: 5000 });
  c.proxies[0]!.setFault({ mode: "pass" });
  expect(c.proxies[0]!.dropped()).toBe(1);
  expect(r.kind).toBe("sse-error");
  if (r.kind === "sse-error") expect(r.errorEvents).toBe(1);
});

test("procStats reads this process; slope is least squares", () => {
  const s = procStats(process.pid)!;
  expect(s.rssKiB).toBeGreaterThan(1000);
  expect(s.fds).toBeGreaterThan(2);
  expect(procStats(2 ** 22 + 12345)).toBeUndefined();
  expect(slope([[0, 1], [1, 3], [2, 5]])).toBeCloseTo(2, 9);
  expect(slope([[0, 7]])).toBe(0);
});
