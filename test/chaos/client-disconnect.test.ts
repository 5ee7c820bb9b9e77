/**
 * Quick (CI): a client that goes away mid-stream makes the real model server
 * abort the sequence and free its KV blocks within 100 ms, read from the
 * server's own load reports (WatchLoad) and its cancelled-outcome counter.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Cluster, startCluster } from "../support/cluster";
import { clientDisconnectScenario } from "./client-disconnect";

let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ servers: 1 });
}, 30_000);
afterAll(async () => {
  await c?.stop();
});

test("client disconnect mid-stream: sequence aborted, KV blocks freed within 100 ms", async () => {
  const r = await clientDisconnectScenario(c, { trials: 5 });
  console.log(JSON.stringify({ scenario: "client-disconnect", freeMs: r.freeMs.map((x) => Math.round(x * 10) / 10), usedBefore: r.usedBefore, cancelled: r.cancelled }));
  for (const u of r.usedBefore) expect(u).toBeGreaterThan(0);
  for (const f of r.freeMs) expect(f).toBeLessThan(100);
  expect(r.cancelled).toBe(5);
}, 30_000);
