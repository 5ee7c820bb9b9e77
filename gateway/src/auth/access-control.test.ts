import { afterAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { testRedis } from "@dispatch/common/src/testing/redis";
import { GatewayError } from "../errors";
import { type AccessEvent, createAccessControl } from "./access-control";
import { RateLimitError } from "./errors";
import { hashApiKey } from "./key-hash";

const pepper = "p";
const clients: Redis[] = [];
afterAll(() => clients.forEach((c) => c.disconnect()));

test("open when no keys are configured", async () => {
  const a = createAccessControl({});
  expect(a.enabled).toBe(false);
  const who = await a.authenticate(undefined);
  expect((await a.admit(who, 10)).keyId).toBe("anonymous");
});

test("keys and limits end to end against a real Redis, with events for metrics", async () => {
  const redis = new Redis((await testRedis()).url);
  clients.push(redis);
  const id = `team-${crypto.randomUUID()}`;
  const events: AccessEvent[] = [];
  const a = createAccessControl({ pepper, redis, keys: [{ id, hash: hashApiKey("sk-1", pepper), requestsPerMinute: 100, tokensPerMinute: 1000 }], onEvent: (e) => events.push(e) });
  const who = await a.authenticate("Bearer sk-1");
  const g = await a.admit(who, 700);
  expect(g.keyId).toBe(id);
  expect(g.headers["x-ratelimit-limit-tokens"]).toBe("1000");
  await g.finish(250);
  await g.finish(250); // counted once
  const err = await a.admit(who, 100).catch((e) => e);
  expect(err).toBeInstanceOf(RateLimitError);
  expect((err as RateLimitError).headers["retry-after"]).toBe("3"); // 50 left, needs 100 at 1000/min
  const bad = await a.authenticate("Bearer sk-2").catch((e) => e);
  expect((bad as GatewayError).status).toBe(401);
  await a.authenticate(undefined).catch(() => {});
  expect(events).toEqual([{ kind: "rate_limited", limit: "tokens" }, { kind: "auth_failure", reason: "invalid_key" }, { kind: "auth_failure", reason: "missing_key" }]);
});

test("keys without a pepper are a startup error", () => {
  expect(() => createAccessControl({ keys: [{ id: "a", hash: hashApiKey("k", "") }] })).toThrow(/pepper/);
});
