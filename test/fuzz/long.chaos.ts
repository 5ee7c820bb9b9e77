/**
 * The long fuzz run (under `npm run test:chaos` only): 20,000 HTTP cases and
 * 5,000 Connect cases from another seed than the quick tests, bounded at
 * 150 s each. Same judgement as http.test.ts and connect.test.ts.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Cluster } from "../support/cluster";
import { runConnectFuzz, runHttpFuzz, startFuzzCluster } from "./fuzz-run";

const SEED = Number(process.env.DISPATCH_FUZZ_SEED ?? 7);
let c: Cluster;
beforeAll(async () => {
  c = await startFuzzCluster();
}, 30_000);
afterAll(async () => {
  await c?.stop();
});

test("HTTP API: 20,000 cases", async () => {
  const { groups } = await runHttpFuzz(c, { label: "http-long", seed: SEED, count: 20_000, concurrency: 8, stuckMs: 10_000, deadlineMs: 150_000 });
  expect(groups.map((g) => g.key)).toEqual([]);
  expect(c.gateway.process.alive()).toBe(true);
  expect((await fetch(`${c.gateway.url}/healthz`)).status).toBe(200);
}, 170_000);

test("Connect API: 5,000 cases", async () => {
  const ms = c.servers[0]!;
  const { client, report: r } = await runConnectFuzz(ms.url, { label: "connect-long", seed: SEED, count: 5000, concurrency: 8, stuckMs: 10_000, deadlineMs: 150_000 });
  for (const f of r.failures.slice(0, 20)) console.log(JSON.stringify(f));
  expect(r.failures).toEqual([]);
  expect(ms.process.alive()).toBe(true);
  expect((await client.health({})).status).toBeGreaterThan(0);
}, 170_000);
