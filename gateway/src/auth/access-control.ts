/**
 * The gateway's access control in one object, so the HTTP layer needs two
 * calls: `admit()` before routing (401 / 429, else a grant with the headers to
 * send) and `grant.finish()` when the response ends (charges completion
 * tokens). Keys come from config and/or Redis (key-store.ts), limits from the
 * key's record (rate-limiter.ts). With no keys configured and no Redis key
 * source, access is open and `admit()` only applies the prompt-length check.
 *
 * @example
 * const access = createAccessControl({ pepper, keys, redis, onEvent: (e) => metrics... });
 * const grant = await access.admit(c.req.header("authorization"), promptTokens);   // throws 401/429
 * for (const [k, v] of Object.entries(grant.headers)) c.header(k, v);
 * // ... stream ...
 * await grant.finish(completionTokens);
 */
import type Redis from "ioredis";
import { RateLimitError } from "./errors";
import { type ApiKeyConfig, createKeyStore, type KeyStore } from "./key-store";
import { createRateLimiter, type RateLimiter } from "./rate-limiter";

export type AccessEvent =
  | { kind: "auth_failure"; reason: "missing_key" | "invalid_key" }
  | { kind: "rate_limited"; limit: "requests" | "tokens" }
  | { kind: "fallback"; reason: "error" | "timeout" };

export interface AccessControlOptions {
  /** HMAC key for the stored hashes (DISPATCH_AUTH_PEPPER). */
  pepper?: string;
  keys?: ApiKeyConfig[];
  /** Shared buckets and (with `keysInRedis`) a key source. */
  redis?: Redis;
  /** Also look keys up in Redis (dispatch:apikey:*). Default: true when redis is given and auth is on. */
  keysInRedis?: boolean;
  /** Turn authentication on even with no config keys (all keys in Redis). */
  required?: boolean;
  onEvent?: (e: AccessEvent) => void;
}

export interface Grant {
  /** The key's id (for logs; "anonymous" when access is open). */
  keyId: string;
  /** x-ratelimit-* headers for the response. */
  headers: Record<string, string>;
  /** Charge the completion's tokens; safe to call more than once (only the first counts). */
  finish(completionTokens: number): Promise<void>;
}

export interface AccessControl {
  readonly enabled: boolean;
  admit(authorization: string | null | undefined, promptTokens: number): Promise<Grant>;
}

export function createAccessControl(o: AccessControlOptions): AccessControl {
  const enabled = !!o.required || (o.keys?.length ?? 0) > 0;
  if (enabled && o.pepper === undefined) throw new Error("API keys are configured but no pepper is set (DISPATCH_AUTH_PEPPER)");
  const store: KeyStore | undefined = enabled
    ? createKeyStore({ pepper: o.pepper!, keys: o.keys, redis: (o.keysInRedis ?? true) ? o.redis : undefined })
    : undefined;
  const limiter: RateLimiter = createRateLimiter({ redis: o.redis, onFallback: (reason) => o.onEvent?.({ kind: "fallback", reason }) });
  const open: Grant = { keyId: "anonymous", headers: {}, finish: async () => {} };

  return {
    enabled,
    async admit(authorization, promptTokens) {
      if (!store) return open;
      let record;
      try {
        record = await store.authenticate(authorization);
      } catch (e) {
        o.onEvent?.({ kind: "auth_failure", reason: authorization ? "invalid_key" : "missing_key" });
        throw e;
      }
      let headers: Record<string, string>;
      try {
        headers = (await limiter.admit(record.id, record, promptTokens)).headers;
      } catch (e) {
        if (e instanceof RateLimitError) o.onEvent?.({ kind: "rate_limited", limit: e.limit });
        throw e;
      }
      let charged = false;
      return {
        keyId: record.id,
        headers,
        async finish(completionTokens) {
          if (charged) return;
          charged = true;
          await limiter.charge(record.id, record, completionTokens);
        },
      };
    },
  };
}
