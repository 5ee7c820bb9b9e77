import { afterAll, describe, expect, test } from "bun:test";
import { createServer, type Server } from "node:net";
import Redis from "ioredis";
import { testRedis } from "@dispatch/common/src/testing/redis";
import { RateLimitError } from "./errors";
import { createMemoryBuckets } from "./memory-buckets";
import { createRateLimiter } from "./rate-limiter";
import { createRedisBuckets } from "./redis-buckets";

const clients: Redis[] = [];
const servers: Server[] = [];
afterAll(() => {
  clients.forEach((c) => c.disconnect());
  servers.forEach((s) => s.close());
});
async function redisClient() {
  const r = new Redis((await testRedis()).url);
  clients.push(r);
  return r;
}
const uniqueKey = () => `k-${crypto.randomUUID()}`;

async function refused(p: Promise<unknown>): Promise<RateLimitError | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    if (e instanceof RateLimitError) return e;
    throw e;
  }
}

describe("memory buckets", () => {
  test("requests per minute: capacity, refusal with retry-after, refill", async () => {
    let t = 0;
    const limiter = createRateLimiter({ now: () => t });
    const limits = { requestsPerMinute: 3 };
    for (let i = 0; i < 3; i++) await limiter.admit("a", limits, 10);
    const err = await refused(limiter.admit("a", limits, 10));
    expect(err?.status).toBe(429);
    expect(err?.headers["retry-after"]).toBe("20"); // one request refills in 60s/3
    expect(err?.toBody().error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
    t += 20_000;
    await limiter.admit("a", limits, 10);
    expect(await refused(limiter.admit("b", limits, 10))).toBeUndefined(); // keys are independent
  });

  test("tokens per minute: prompt at admission, completion charged after, debt is bounded", async () => {
    let t = 0;
    const limiter = createRateLimiter({ now: () => t });
    const limits = { tokensPerMinute: 1000 };
    const g = await limiter.admit("a", limits, 600);
    expect(g.headers["x-ratelimit-remaining-tokens"]).toBe("400");
    await limiter.charge("a", limits, 300); // 100 left
    const err = await refused(limiter.admit("a", limits, 200));
    expect(err?.limit).toBe("tokens");
    expect(err?.retryAfterSeconds).toBe(6); // 100 tokens at 1000/min
    // A request larger than the whole budget runs once the bucket is full, then leaves debt.
    t += 60_000;
    await limiter.admit("a", limits, 5000);
    t += 60_000; // refilled 1000 from -1000 (floor) -> 0
    expect((await refused(limiter.admit("a", limits, 1)))?.limit).toBe("tokens");
  });

  test("the LRU bound drops old keys (they come back full)", async () => {
    const store = createMemoryBuckets({ maxKeys: 2, now: () => 0 });
    const l = { requestsPerMinute: 1 };
    await store.apply("a", l, 1, 0, "admit");
    expect((await store.apply("a", l, 1, 0, "admit")).allowed).toBe(false);
    await store.apply("b", l, 1, 0, "admit");
    await store.apply("c", l, 1, 0, "admit");
    expect((await store.apply("a", l, 1, 0, "admit")).allowed).toBe(true);
  });
});

describe("redis buckets", () => {
  test("same arithmetic as memory: admit, refuse, charge", async () => {
    const store = createRedisBuckets(await redisClient(), { prefix: `test:${crypto.randomUUID()}:` });
    const k = uniqueKey();
    const limits = { requestsPerMinute: 2, tokensPerMinute: 100 };
    const a = await store.apply(k, limits, 1, 60, "admit");
    expect(a).toMatchObject({ allowed: true });
    expect(a.requestsLeft).toBeCloseTo(1, 1);
    expect(a.tokensLeft).toBeCloseTo(40, 0);
    const b = await store.apply(k, limits, 1, 60, "admit");
    expect(b.allowed).toBe(false);
    expect(b.limitedBy).toBe("tokens");
    expect(b.retryAfterMs).toBeGreaterThan(11_000);
    expect(b.retryAfterMs).toBeLessThanOrEqual(12_000);
    const c = await store.apply(k, limits, 0, 50, "charge");
    expect(c.tokensLeft).toBeLessThan(0);
  });

  test("atomic across gateways: two clients racing never over-admit", async () => {
    const [r1, r2] = [await redisClient(), new Redis((await testRedis()).url)];
    clients.push(r2);
    const k = uniqueKey();
    const l1 = createRateLimiter({ redis: r1, deadlineMs: 1000 });
    const l2 = createRateLimiter({ redis: r2, deadlineMs: 1000 });
    const limits = { requestsPerMinute: 25 };
    const attempts = Array.from({ length: 60 }, (_, i) => ((i % 2 ? l1 : l2).admit(k, limits, 1).then(() => "ok", (e) => (e instanceof RateLimitError ? "429" : "err"))));
    const results = await Promise.all(attempts);
    expect(results.filter((r) => r === "ok").length).toBe(25);
    expect(results.filter((r) => r === "err").length).toBe(0);
  });
});

describe("fallback when Redis is absent or slow", () => {
  test("a Redis that never answers: the deadline holds and memory buckets decide", async () => {
    const server = createServer(() => {}); // accepts, never replies
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const redis = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 0, enableReadyCheck: false });
    redis.on("error", () => {});
    clients.push(redis);
    const reasons: string[] = [];
    const limiter = createRateLimiter({ redis, deadlineMs: 30, onFallback: (r) => reasons.push(r) });
    const limits = { requestsPerMinute: 2 };
    const t0 = performance.now();
    const first = await limiter.admit("k", limits, 1);
    expect(performance.now() - t0).toBeLessThan(500);
    expect(first.source).toBe("memory");
    expect(reasons).toEqual(["timeout"]);
    expect((await limiter.admit("k", limits, 1)).source).toBe("memory"); // cooling down: no second wait
    expect(await refused(limiter.admit("k", limits, 1))).toBeInstanceOf(RateLimitError); // local limits still apply
  });

  test("a refused connection falls back at once", async () => {
    const redis = new Redis({ port: 1, host: "127.0.0.1", maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    redis.on("error", () => {});
    clients.push(redis);
    const reasons: string[] = [];
    const limiter = createRateLimiter({ redis, deadlineMs: 500, onFallback: (r) => reasons.push(r) });
    expect((await limiter.admit("k", { requestsPerMinute: 1 }, 1)).source).toBe("memory");
    expect(reasons.length).toBe(1);
  });

  test("unlimited keys never touch a store", async () => {
    const limiter = createRateLimiter({});
    for (let i = 0; i < 100; i++) await limiter.admit("k", {}, 1_000_000);
  });
});
