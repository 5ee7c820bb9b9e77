/**
 * Redis stops and starts while the gateway serves: no request fails. The
 * gateway gets Redis the way the Helm chart gives it (DISPATCH_REDIS_URL) and
 * a hashed API key with per-minute limits, so every request looks up its key
 * and takes from rate-limit buckets in Redis. A second test checks that Redis
 * really was on the request path (a connection and bucket keys before the
 * stop) and that the gateway came back to it after the start; without that
 * the first would prove nothing.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Redis } from "ioredis";
import { hashApiKey } from "../../gateway/src/auth/key-hash";
import { type Cluster, startCluster } from "../support/cluster";
import { chatBody, runLoad, tally } from "../support/load";
import { type RedisHandle, startRedis } from "../support/redis-process";

const KEY = "sk-dispatch-chaos-test-key";
const PEPPER = "chaos-pepper";
let redis: RedisHandle;
let c: Cluster;
let before = { clients: 0, keys: 0 };
let after = { clients: 0, keys: 0 };
let backMs = 0;

async function redisState(url: string): Promise<{ clients: number; keys: number }> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  try {
    await r.connect();
    const list = (await r.client("LIST")) as string;
    return { clients: list.split("\n").filter((l) => l.trim() && !l.includes("cmd=client")).length, keys: await r.dbsize() };
  } finally {
    r.disconnect();
  }
}

beforeAll(async () => {
  redis = await startRedis();
  c = await startCluster({
    servers: 2,
    apiKey: KEY,
    gatewayEnv: {
      DISPATCH_REDIS_URL: redis.url,
      DISPATCH_AUTH_PEPPER: PEPPER,
      DISPATCH_AUTH_KEYS: JSON.stringify([{ id: "chaos", hash: hashApiKey(KEY, PEPPER), requests_per_minute: 1_000_000, tokens_per_minute: 1_000_000_000 }]),
    },
  });
}, 30_000);
afterAll(async () => {
  await c?.stop();
  await redis?.stop();
});

test("Redis stopped for 1.5 s and started again under load: no failed request", async () => {
  const chaos = (async () => {
    await Bun.sleep(1000);
    before = await redisState(redis.url);
    await redis.stop();
    await Bun.sleep(1500);
    await redis.start();
    // The load is still running: the gateway goes back to Redis after its fallback cooldown (2 s).
    const started = performance.now();
    while (performance.now() - started < 6000) {
      after = await redisState(redis.url);
      if (after.keys > 0) break;
      await Bun.sleep(100);
    }
    backMs = Math.round(performance.now() - started);
  })();
  const outcomes = await runLoad({
    baseUrl: c.gateway.url,
    concurrency: 6,
    durationMs: 9000,
    maxRequests: 3000,
    body: (n) => chatBody(c.model, n, 12),
    chatOptions: { headers: { authorization: `Bearer ${KEY}` } },
  });
  await chaos;
  const t = tally(outcomes);
  console.log(JSON.stringify({ scenario: "redis-restart", tally: t, redisBeforeStop: before, redisAfterStart: after, backOnRedisMs: backMs }));
  const refused = outcomes.find((o) => o.kind === "http-error");
  if (refused) console.log(JSON.stringify(refused));
  expect(t.total).toBeGreaterThan(20);
  expect(t.byKind.ok).toBe(t.total);
}, 30_000);

test("Redis was on the request path before the stop and again within 4 s of the start (a gateway connection, rate-limit keys)", () => {
  expect(backMs).toBeLessThan(4000);
  expect(before.clients).toBeGreaterThan(0);
  expect(before.keys).toBeGreaterThan(0);
  expect(after.clients).toBeGreaterThan(0);
  expect(after.keys).toBeGreaterThan(0);
});
