/**
 * The gateway's access control in one object, three calls: `authenticate()`
 * in a middleware before the body is read (401), `admit()` once the prompt is
 * tokenized (429, else a grant with the headers to send), `grant.finish()`
 * when the response ends (charges the completion's tokens). Keys come from
 * config and/or Redis (key-store.ts), limits from the key's record
 * (rate-limiter.ts). With no keys configured access is open: `authenticate()`
 * returns the anonymous principal and `admit()` grants without limits.
 *
 * @example
 * const access = createAccessControl({ pepper, keys, redis, onEvent: (e) => metrics... });
 * const principal = await access.authenticate(c.req.header("authorization"));   // throws 401
 * const grant = await access.admit(principal, promptTokens);                      // throws 429
 * for (const [k, v] of Object.entries(grant.headers)) c.header(k, v);
 * // ... stream ...
 * await grant.finish(completionTokens);
 */
import type Redis from "ioredis";
import { RateLimitError } from "./errors";
import { type ApiKeyConfig, type ApiKeyRecord, createKeyStore, type KeyStore } from "./key-store";
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
  /** The caller's key record (401 when missing or wrong); ANONYMOUS when access is open. */
  authenticate(authorization: string | null | undefined): Promise<ApiKeyRecord>;
  /** Takes one request and `promptTokens` from the key's buckets (429 when over). */
  admit(principal: ApiKeyRecord, promptTokens: number): Promise<Grant>;
}

/** The principal of every request when no keys are configured. */
export const ANONYMOUS: ApiKeyRecord = Object.freeze({ id: "anonymous" });

export function createAccessControl(o: AccessControlOptions): AccessControl {
  const enabled = !!o.required || (o.keys?.length ?? 0) > 0;
  if (enabled && o.pepper === undefined) throw new Error("API keys are configured but no pepper is set (DISPATCH_AUTH_PEPPER)");
  const store: KeyStore | undefined = enabled
    ? createKeyStore({ pepper: o.pepper!, keys: o.keys, redis: (o.keysInRedis ?? true) ? o.redis : undefined })
    : undefined;
  const limiter: RateLimiter = createRateLimiter({ redis: o.redis, onFallback: (reason) => o.onEvent?.({ kind: "fallback", reason }) });
  const open: Grant = { keyId: ANONYMOUS.id, headers: {}, finish: async () => {} };

  return {
    enabled,
    async authenticate(authorization) {
      if (!store) return ANONYMOUS;
      try {
        return await store.authenticate(authorization);
      } catch (e) {
        o.onEvent?.({ kind: "auth_failure", reason: authorization ? "invalid_key" : "missing_key" });
        throw e;
      }
    },
    async admit(record, promptTokens) {
      if (!store || record === ANONYMOUS) return open;
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
