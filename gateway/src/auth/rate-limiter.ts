/**
 * Per-key rate limits: requests per minute and tokens per minute. Admission
 * takes one request and the prompt's tokens; the completion's tokens are
 * charged when the response ends. Redis (shared) when configured, with a hard
 * deadline: a Redis that errors or answers late is skipped for `cooldownMs`
 * and this replica's memory buckets decide instead (fail open to local limits,
 * never to "no limits", never to an error for the client).
 *
 * @example
 * const limiter = createRateLimiter({ redis });
 * const grant = await limiter.admit("team-a", { requestsPerMinute: 60 }, 812); // throws RateLimitError (429)
 * // ... stream the response ...
 * await limiter.charge("team-a", { tokensPerMinute: 10_000 }, completionTokens);
 */
import type Redis from "ioredis";
import type { BucketOutcome, BucketStore, RateLimits } from "./bucket-store";
import { RateLimitError } from "./errors";
import { createMemoryBuckets } from "./memory-buckets";
import { createRedisBuckets } from "./redis-buckets";

export interface RateLimiterOptions {
  redis?: Redis;
  /** Longest a limit check may wait for Redis before the memory buckets decide. */
  deadlineMs?: number;
  /** How long Redis is skipped after a failure or a late answer. */
  cooldownMs?: number;
  now?: () => number;
  /** Called when Redis is skipped (metrics); never receives the key. */
  onFallback?: (reason: "error" | "timeout") => void;
}

export interface Grant {
  source: "redis" | "memory";
  /** OpenAI-style x-ratelimit-* headers for the response. */
  headers: Record<string, string>;
}

export interface RateLimiter {
  admit(keyId: string, limits: RateLimits, promptTokens: number): Promise<Grant>;
  charge(keyId: string, limits: RateLimits, completionTokens: number): Promise<void>;
}

const unlimited = (l: RateLimits) => !(l.requestsPerMinute! > 0) && !(l.tokensPerMinute! > 0);

export function createRateLimiter(opts: RateLimiterOptions = {}): RateLimiter {
  const now = opts.now ?? Date.now;
  const deadlineMs = opts.deadlineMs ?? 25;
  const cooldownMs = opts.cooldownMs ?? 2_000;
  const memory = createMemoryBuckets({ now });
  const shared: BucketStore | undefined = opts.redis ? createRedisBuckets(opts.redis) : undefined;
  let skipRedisUntil = 0;

  async function apply(keyId: string, limits: RateLimits, req: number, tok: number, mode: "admit" | "charge") {
    if (shared && now() >= skipRedisUntil) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), deadlineMs)));
      try {
        const outcome = await Promise.race([shared.apply(keyId, limits, req, tok, mode), late]);
        if (outcome !== "timeout") return { outcome, source: "redis" as const };
        skipRedisUntil = now() + cooldownMs;
        opts.onFallback?.("timeout");
      } catch {
        skipRedisUntil = now() + cooldownMs;
        opts.onFallback?.("error");
      } finally {
        clearTimeout(timer);
      }
    }
    return { outcome: await memory.apply(keyId, limits, req, tok, mode), source: "memory" as const };
  }

  return {
    async admit(keyId, limits, promptTokens) {
      if (unlimited(limits)) return { source: "memory", headers: {} };
      const { outcome, source } = await apply(keyId, limits, 1, promptTokens, "admit");
      const headers = rateLimitHeaders(limits, outcome);
      if (!outcome.allowed) throw new RateLimitError(outcome.limitedBy ?? "requests", Math.max(1, Math.ceil(outcome.retryAfterMs / 1000)), headers);
      return { source, headers };
    },
    async charge(keyId, limits, completionTokens) {
      if (!(limits.tokensPerMinute! > 0) || completionTokens <= 0) return;
      await apply(keyId, limits, 0, completionTokens, "charge");
    },
  };
}

/** OpenAI's x-ratelimit-limit-* / x-ratelimit-remaining-* headers. */
export function rateLimitHeaders(limits: RateLimits, o: BucketOutcome): Record<string, string> {
  const h: Record<string, string> = {};
  if (limits.requestsPerMinute! > 0) {
    h["x-ratelimit-limit-requests"] = String(limits.requestsPerMinute);
    h["x-ratelimit-remaining-requests"] = String(Math.max(0, Math.floor(o.requestsLeft ?? 0)));
  }
  if (limits.tokensPerMinute! > 0) {
    h["x-ratelimit-limit-tokens"] = String(limits.tokensPerMinute);
    h["x-ratelimit-remaining-tokens"] = String(Math.max(0, Math.floor(o.tokensLeft ?? 0)));
  }
  return h;
}
