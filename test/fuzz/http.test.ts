/**
 * Quick (CI): 1,800 generated malformed requests (seeded) against a real
 * gateway process in front of a real model server. Every answer is a 4xx in
 * OpenAI's error shape (or, for odd-but-valid input, not a 5xx); no stuck
 * connection; the gateway is alive and answers /healthz afterwards.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Cluster } from "../support/cluster";
import { runHttpFuzz, startFuzzCluster } from "./fuzz-run";
import { fuzzRawHttp, rawCases } from "./raw-http";
import { createRng } from "./rng";

const SEED = Number(process.env.DISPATCH_FUZZ_SEED ?? 20261129);
let c: Cluster;
beforeAll(async () => {
  c = await startFuzzCluster();
}, 30_000);
afterAll(async () => {
  await c?.stop();
});

test("HTTP API fuzz: 4xx in OpenAI's shape, no 5xx, nothing stuck, gateway alive", async () => {
  const { cases, report: r, groups } = await runHttpFuzz(c, { label: "http", seed: SEED, count: 1800, concurrency: 6, stuckMs: 8000, deadlineMs: 45_000 });
  expect(r.sent).toBe(cases.length);
  expect(groups.map((g) => g.key)).toEqual([]);
  expect(c.gateway.process.alive()).toBe(true);
  expect((await fetch(`${c.gateway.url}/healthz`)).status).toBe(200);
}, 60_000);

test("raw HTTP/1.1 abuse: a 4xx or a close (505 from Bun's parser for bad versions), never silence, gateway alive", async () => {
  const cases = rawCases(c.model, createRng(SEED), 200);
  const results = await fuzzRawHttp("127.0.0.1", c.gateway.port, cases, { stuckMs: 4000, concurrency: 6 });
  const statuses: Record<string, number> = {};
  for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  console.log(JSON.stringify({ fuzz: "raw-http", seed: SEED, sent: results.length, statuses }));
  const bad = results.filter((r) => r.stuck || (r.status >= 500 && r.status !== 505));
  expect(bad).toEqual([]);
  expect(c.gateway.process.alive()).toBe(true);
  expect((await fetch(`${c.gateway.url}/healthz`)).status).toBe(200);
}, 30_000);
