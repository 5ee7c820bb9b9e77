/**
 * Kill one of 4 model servers under streaming load (8 concurrent clients):
 * requests not yet streaming are retried elsewhere (no HTTP error reaches a
 * client), streams in flight end with exactly one SSE error event and none
 * hangs, the dead server is ejected within 1 s and taken back when it returns.
 */
import { expect, test } from "bun:test";
import { killServerScenario } from "./kill-server";

test("kill 1 of 4 servers under load: zero failures before streaming, one SSE error per cut stream, eject < 1 s, return", async () => {
  const r = await killServerScenario({ servers: 4, concurrency: 8, loadMs: 6000, maxTokens: 32 });
  console.log(JSON.stringify({ scenario: "kill-1-of-4", tally: r.tally, ejectMs: Math.round(r.ejectMs), returnMs: Math.round(r.returnMs), servedAfterReturn: r.servedAfterReturn }));
  expect(r.tally.total).toBeGreaterThan(50);
  expect(r.tally.byKind["http-error"] ?? 0).toBe(0);
  expect(r.tally.byKind.hang ?? 0).toBe(0);
  expect(r.tally.byKind.broken ?? 0).toBe(0);
  // Only streams that were on the dead server can fail; at most one per client.
  expect(r.streamErrors.length).toBeLessThanOrEqual(8);
  for (const s of r.streamErrors) if (s.kind === "sse-error") expect(s.errorEvents).toBe(1);
  expect(r.ejectMs).toBeLessThan(1000);
  expect(r.returnMs).toBeLessThan(2000);
  expect(r.servedAfterReturn).toBeGreaterThan(0);
}, 60_000);

test("the same with the gateway's default health settings (probe every 5 s, 2 s timeout): failed calls eject it", async () => {
  const r = await killServerScenario({
    servers: 4,
    concurrency: 8,
    loadMs: 6000,
    maxTokens: 32,
    gatewayEnv: { DISPATCH_HEALTH_INTERVAL_MS: "5000", DISPATCH_HEALTH_TIMEOUT_MS: "2000" },
  });
  console.log(JSON.stringify({ scenario: "kill-1-of-4-default-health", tally: r.tally, ejectMs: Math.round(r.ejectMs), returnMs: Math.round(r.returnMs), servedAfterReturn: r.servedAfterReturn }));
  expect(r.tally.byKind["http-error"] ?? 0).toBe(0);
  expect(r.tally.byKind.hang ?? 0).toBe(0);
  expect(r.tally.byKind.broken ?? 0).toBe(0);
  expect(r.ejectMs).toBeLessThan(1000);
  expect(r.servedAfterReturn).toBeGreaterThan(0);
}, 60_000);

test("SIGTERM 1 of 4 (a rolling restart: the server drains and exits): the same guarantees", async () => {
  const r = await killServerScenario({ servers: 4, concurrency: 8, loadMs: 6000, maxTokens: 32, signal: "SIGTERM" });
  console.log(JSON.stringify({ scenario: "sigterm-1-of-4", tally: r.tally, ejectMs: Math.round(r.ejectMs), returnMs: Math.round(r.returnMs), servedAfterReturn: r.servedAfterReturn }));
  expect(r.tally.byKind["http-error"] ?? 0).toBe(0);
  expect(r.tally.byKind.hang ?? 0).toBe(0);
  expect(r.tally.byKind.broken ?? 0).toBe(0);
  for (const s of r.streamErrors) if (s.kind === "sse-error") expect(s.errorEvents).toBe(1);
  expect(r.ejectMs).toBeLessThan(1000);
  expect(r.servedAfterReturn).toBeGreaterThan(0);
}, 60_000);
