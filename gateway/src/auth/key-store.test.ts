import { afterAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { testRedis } from "@dispatch/common/src/testing/redis";
import { GatewayError } from "../errors";
import { apiKeyMatches, bearerKey, generateApiKey, hashApiKey } from "./key-hash";
import { createKeyStore } from "./key-store";

const pepper = "test-pepper";
const clients: Redis[] = [];
afterAll(() => clients.forEach((c) => c.disconnect()));

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    return (e as GatewayError).status;
  }
}

describe("api key hashing", () => {
  test("hash is keyed by the pepper and matches only the right key", () => {
    const key = generateApiKey();
    const stored = hashApiKey(key, pepper);
    expect(stored).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(stored).not.toContain(key);
    expect(apiKeyMatches(key, stored, pepper)).toBe(true);
    expect(apiKeyMatches(key + "x", stored, pepper)).toBe(false);
    expect(apiKeyMatches(key, stored, "other-pepper")).toBe(false);
    expect(() => apiKeyMatches(key, "md5:abc", pepper)).toThrow(/sha256/);
  });

  test("bearer parsing", () => {
    expect(bearerKey("Bearer sk-1")).toBe("sk-1");
    expect(bearerKey("bearer   sk-1 ")).toBe("sk-1");
    expect(bearerKey("Basic abc")).toBeUndefined();
    expect(bearerKey(null)).toBeUndefined();
  });
});

describe("key store", () => {
  const key = "sk-dispatch-config-key";
  const store = createKeyStore({ pepper, keys: [{ id: "team-a", hash: hashApiKey(key, pepper), requestsPerMinute: 5 }, { id: "gone", hash: hashApiKey("sk-old", pepper), disabled: true }] });

  test("config keys: right key passes with its limits; missing, wrong and disabled keys are 401", async () => {
    expect(await store.authenticate(`Bearer ${key}`)).toEqual({ id: "team-a", requestsPerMinute: 5, tokensPerMinute: undefined });
    expect(await status(store.authenticate(undefined))).toBe(401);
    expect(await status(store.authenticate("Bearer sk-wrong"))).toBe(401);
    expect(await status(store.authenticate("Bearer sk-old"))).toBe(401);
    const err = await store.authenticate("Bearer nope").catch((e) => e as GatewayError);
    expect((err as GatewayError).toBody().error).toMatchObject({ type: "invalid_request_error", code: "invalid_api_key" });
    expect(JSON.stringify((err as GatewayError).toBody())).not.toContain("nope");
  });

  test("keys in Redis are found, cached and revocable", async () => {
    const { url } = await testRedis();
    const redis = new Redis(url);
    clients.push(redis);
    let t = 1_000;
    const prefix = `test:${crypto.randomUUID()}:`;
    const s = createKeyStore({ pepper, redis, redisPrefix: prefix, cacheTtlMs: 100, now: () => t });
    const k = "sk-in-redis";
    const hex = hashApiKey(k, pepper).slice(7);
    expect(await status(s.authenticate(`Bearer ${k}`))).toBe(401);
    await redis.set(prefix + hex, JSON.stringify({ id: "team-r", tokensPerMinute: 100 }));
    t += 2_000; // past the negative-cache window
    expect((await s.authenticate(`Bearer ${k}`)).id).toBe("team-r");
    await redis.set(prefix + hex, JSON.stringify({ id: "team-r", disabled: true }));
    expect((await s.authenticate(`Bearer ${k}`)).id).toBe("team-r"); // cached
    t += 200;
    expect(await status(s.authenticate(`Bearer ${k}`))).toBe(401);
  });

  test("a dead Redis does not break config keys", async () => {
    const redis = new Redis({ port: 1, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on("error", () => {});
    clients.push(redis);
    const s = createKeyStore({ pepper, redis, keys: [{ id: "a", hash: hashApiKey("sk-a", pepper) }], deadlineMs: 30 });
    expect((await s.authenticate("Bearer sk-a")).id).toBe("a");
    expect(await status(s.authenticate("Bearer sk-b"))).toBe(401);
  });
});
