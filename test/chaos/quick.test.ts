/**
 * Quick (CI) cut of the fault suite, a few seconds each: kill 1 of 2 model
 * servers under load, and a peer that hangs then answers 5xx. The full runs
 * (4 servers, slow and dropping peers, overload, KV exhaustion, Redis) are
 * the `*.chaos.ts` files, run by `npm run test:chaos`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
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
});
