import { expect, test } from "bun:test";
import { createPolicy } from "@dispatch/gateway/src/routing/create-policy";
import { capacityPerMs } from "./capacity";
import { engineFor } from "./matrix";
import { summarize } from "./metrics";
import { createOraclePolicy } from "./oracle";
import { simulate } from "./simulate";
import { multiTurnWorkload, sharedPrefixWorkload } from "./workloads";

const w = sharedPrefixWorkload(64, 1);
const engine = engineFor(w);
const rate = capacityPerMs(w, engine, 8) * 0.8;

test("the simulation is deterministic for a seed and serves every request", async () => {
  const run = () => simulate({ workload: w, engine, servers: 8, ratePerMs: rate, seed: 3, policy: () => createPolicy("dispatch") });
  const a = await run();
  const b = await run();
  expect(a.ttftMs).toEqual(b.ttftMs);
  expect(a.ttftMs).toHaveLength(w.requests.length);
  expect(a.hitTokens).toBe(b.hitTokens);
});

test("cache-aware routing beats load-only routing on hit rate, as it must", async () => {
  const run = (p: string) => simulate({ workload: w, engine, servers: 8, ratePerMs: rate, seed: 1, policy: () => createPolicy(p) });
  const cached = summarize(await run("dispatch"));
  const blind = summarize(await run("least-load"));
  expect(cached.hitRate).toBeGreaterThan(0.8);
  expect(blind.hitRate).toBeLessThan(0.5);
  expect(cached.ttftP99Ms).toBeLessThan(blind.ttftP99Ms);
});

test("the oracle reads the servers; replicas in approximate mode lose hit rate unless they share", async () => {
  const oracle = await simulate({ workload: w, engine, servers: 8, ratePerMs: rate, seed: 1, policy: (s) => createOraclePolicy(s) });
  expect(summarize(oracle).hitRate).toBeGreaterThan(0.75);
  const m = multiTurnWorkload(64, 1, 64, 4);
  const e = engineFor(m);
  const r = capacityPerMs(m, e, 8) * 0.8;
  const run = (share: "none" | "memory") => simulate({ workload: m, engine: e, servers: 8, ratePerMs: r, seed: 1, replicas: 4, indexMode: "approximate", share, policy: () => createPolicy("dispatch") });
  const alone = summarize(await run("none"));
  const shared = summarize(await run("memory"));
  expect(shared.hitRate).toBeGreaterThan(alone.hitRate);
});
