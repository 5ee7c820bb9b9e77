/**
 * Buckets in Redis, shared by every gateway replica. One Lua script does the
 * whole read-refill-check-take so concurrent gateways cannot both spend the
 * same tokens; it reads the clock with TIME so replicas' clock skew does not
 * matter. Both buckets of a key share a hash tag (`{keyId}`), so the script
 * also runs on Redis Cluster. Idle buckets expire after two minutes (an
 * expired bucket is full, which is exactly what two idle minutes would give).
 *
 * @example
 * const store = createRedisBuckets(new Redis(url));
 * await store.apply("team-a", { tokensPerMinute: 10_000 }, 1, 512, "admit");
 */
import { createHash } from "node:crypto";
import type Redis from "ioredis";
import type { BucketOutcome, BucketStore, RateLimits } from "./bucket-store";

// Mirrors token-bucket.ts: refill, admissionNeed, waitMs, take (debt floored at -capacity).
export const RATE_LIMIT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local caps = { tonumber(ARGV[1]), tonumber(ARGV[2]) }
local costs = { tonumber(ARGV[3]), tonumber(ARGV[4]) }
local admit = ARGV[5] == 'admit'
local levels = {}
local waits = { 0, 0 }
for i = 1, 2 do
  local cap = caps[i]
  if cap > 0 then
    local v = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
    local level = cap
    if v[1] then
      level = math.min(cap, tonumber(v[1]) + math.max(0, now - tonumber(v[2])) * cap / 60000)
    end
    levels[i] = level
    local need = math.min(costs[i], cap)
    if admit and level < need then
      waits[i] = math.ceil((need - level) * 60000 / cap)
    end
  end
end
if waits[1] > 0 or waits[2] > 0 then
  local by = 'requests'
  if waits[2] > waits[1] then by = 'tokens' end
  return { 0, math.max(waits[1], waits[2]), by, tostring(levels[1] or ''), tostring(levels[2] or '') }
end
for i = 1, 2 do
  if caps[i] > 0 then
    local cost = costs[i]
    if i == 1 and not admit then cost = 0 end
    local level = math.max(-caps[i], levels[i] - cost)
    levels[i] = level
    redis.call('HSET', KEYS[i], 'tokens', tostring(level), 'ts', tostring(now))
    redis.call('PEXPIRE', KEYS[i], 120000)
  end
end
return { 1, 0, '', tostring(levels[1] or ''), tostring(levels[2] or '') }
`;

const SHA = createHash("sha1").update(RATE_LIMIT_LUA).digest("hex");

export function createRedisBuckets(redis: Redis, opts: { prefix?: string } = {}): BucketStore {
  const prefix = opts.prefix ?? "dispatch:rl:";
  return {
    async apply(keyId: string, limits: RateLimits, requests: number, tokens: number, mode: "admit" | "charge"): Promise<BucketOutcome> {
      const keys = [`${prefix}{${keyId}}:req`, `${prefix}{${keyId}}:tok`];
      const args = [limits.requestsPerMinute ?? 0, limits.tokensPerMinute ?? 0, requests, tokens, mode].map(String);
      let reply: unknown;
      try {
        reply = await redis.evalsha(SHA, 2, ...keys, ...args);
      } catch (e) {
        if (!String((e as Error).message).includes("NOSCRIPT")) throw e;
        reply = await redis.eval(RATE_LIMIT_LUA, 2, ...keys, ...args);
      }
      const [allowed, wait, by, req, tok] = reply as [number, number, string, string, string];
      const num = (s: string) => (s === "" ? undefined : Number(s));
      return {
        allowed: allowed === 1,
        retryAfterMs: Number(wait),
        limitedBy: by === "requests" || by === "tokens" ? by : undefined,
        requestsLeft: num(req),
        tokensLeft: num(tok),
      };
    },
  };
}
