/**
 * Faulty peers in front of one of two real model servers: a server that
 * hangs, one that is slow, one that answers 5xx, one that drops streams
 * mid-way. What clients may see is stated per fault.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Cluster, startCluster } from "../support/cluster";
import { faultyPeerScenario } from "./faulty-peer";

let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ servers: 2, proxies: true });
}, 30_000);
afterAll(async () => {
  await c?.stop();
});

const log = (r: Awaited<ReturnType<typeof faultyPeerScenario>>) =>
  console.log(JSON.stringify({ fault: r.fault, tally: r.tally, ejected: r.ejected, returned: r.returned, seen: r.seen }));

test("5xx: every request retried on the good server, the bad one ejected and taken back", async () => {
  const r = await faultyPeerScenario(c, { mode: "error", status: 503 }, { concurrency: 4, loadMs: 2500 });
  log(r);
  expect(r.tally.byKind.ok).toBe(r.tally.total);
  expect(r.ejected).toBe(true);
  expect(r.returned).toBe(true);
}, 30_000);

test("hang: no client waits forever; the hung server is ejected and taken back", async () => {
  const r = await faultyPeerScenario(c, { mode: "hang" }, { concurrency: 4, loadMs: 2500, stallMs: 8000 });
  log(r);
  expect(r.tally.byKind.hang ?? 0).toBe(0);
  expect(r.tally.byKind.broken ?? 0).toBe(0);
  expect(r.ejected).toBe(true);
  expect(r.returned).toBe(true);
}, 40_000);

test("slow (80 ms per chunk): every request completes", async () => {
  const r = await faultyPeerScenario(c, { mode: "slow", delayMs: 80 }, { concurrency: 4, loadMs: 2500, maxTokens: 8 });
  log(r);
  expect(r.tally.byKind.ok).toBe(r.tally.total);
  expect(r.returned).toBe(true);
}, 30_000);

test("drop mid-stream: cut streams end with exactly one SSE error event, nothing hangs, the rest succeed", async () => {
  const r = await faultyPeerScenario(c, { mode: "drop", dropAfterChunks: 3 }, { concurrency: 4, loadMs: 2500, maxTokens: 24 });
  log(r);
  expect(r.tally.byKind.hang ?? 0).toBe(0);
  expect(r.tally.byKind.broken ?? 0).toBe(0);
  expect(r.tally.byKind["http-error"] ?? 0).toBe(0);
  const cut = r.outcomes.filter((x) => x.kind === "sse-error");
  expect(cut.length).toBeGreaterThan(0);
  // Streams broken mid-way count as failures: the server is ejected (it used to get more traffic instead).
  expect(r.ejected).toBe(true);
  for (const s of cut) if (s.kind === "sse-error") expect(s.errorEvents).toBe(1);
  expect(r.tally.byKind.ok ?? 0).toBeGreaterThan(0);
}, 30_000);
