/**
 * Resolves a presented API key to its record. Keys come from the config file
 * (hashed) and, when Redis is configured, from `dispatch:apikey:<hex digest>`
 * (JSON, written by hash-key-cli.ts `--redis`), so keys can be added or
 * revoked without a restart. The digest is a keyed HMAC, so the Map/Redis
 * lookup by digest leaks nothing about the key; the final comparison is
 * constant time anyway. Redis answers are cached briefly (revocation takes
 * effect within `cacheTtlMs`); a Redis that errors or is late falls back to the
 * config keys alone.
 *
 * @example
 * const store = createKeyStore({ pepper, keys: [{ id: "team-a", hash: "sha256:...", requestsPerMinute: 60 }] });
 * const key = await store.authenticate(req.headers.get("authorization")); // throws 401
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type Redis from "ioredis";
import type { RateLimits } from "./bucket-store";
import { invalidKey, missingKey } from "./errors";
import { bearerKey, parseKeyHash } from "./key-hash";

/** What a key may use and how its requests are scheduled. */
export interface KeyAccess {
  /** The models this key may use (others read as not found); absent: every model. */
  models?: string[];
  /** `priority` for this key's generation requests that set none (dispatch models: lower runs first). */
  priority?: number;
}

export interface ApiKeyConfig extends RateLimits, KeyAccess {
  /** A name for logs and metrics (never the key). */
  id: string;
  /** `sha256:<hex>` from hashApiKey(). */
  hash: string;
  disabled?: boolean;
}

export interface ApiKeyRecord extends RateLimits, KeyAccess {
  id: string;
}

export interface KeyStore {
  /** The key's record, or a 401 GatewayError (missing or wrong key). */
  authenticate(authorization: string | null | undefined): Promise<ApiKeyRecord>;
}

export interface KeyStoreOptions {
  pepper: string;
  keys?: ApiKeyConfig[];
  redis?: Redis;
  redisPrefix?: string;
  cacheTtlMs?: number;
  deadlineMs?: number;
  now?: () => number;
}

interface Entry {
  digest: Buffer;
  record: ApiKeyRecord;
  disabled: boolean;
}

export function createKeyStore(opts: KeyStoreOptions): KeyStore {
  const now = opts.now ?? Date.now;
  const ttl = opts.cacheTtlMs ?? 10_000;
  const deadlineMs = opts.deadlineMs ?? 50;
  const prefix = opts.redisPrefix ?? "dispatch:apikey:";
  const local = new Map<string, Entry>();
  for (const k of opts.keys ?? []) {
    if (!k.id) throw new Error("every API key needs an id");
    const digest = parseKeyHash(k.hash);
    local.set(digest.toString("hex"), { digest, record: toRecord(k), disabled: !!k.disabled });
  }
  const cache = new Map<string, { entry: Entry | undefined; until: number }>();

  async function fromRedis(hex: string): Promise<Entry | undefined> {
    if (!opts.redis) return undefined;
    const hit = cache.get(hex);
    if (hit && hit.until > now()) return hit.entry;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const raw = await Promise.race([
        opts.redis.get(prefix + hex),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("redis deadline")), deadlineMs))),
      ]);
      let entry: Entry | undefined;
      if (raw) {
        const parsed = JSON.parse(raw) as Partial<ApiKeyConfig>;
        entry = { digest: Buffer.from(hex, "hex"), record: toRecord({ ...parsed, id: String(parsed.id ?? "redis-key") }), disabled: !!parsed.disabled };
      }
      // Unknown digests are cached too (briefly), so a flood of bad keys does not become a flood of Redis reads.
      if (cache.size > 50_000) cache.clear();
      cache.set(hex, { entry, until: now() + (entry ? ttl : Math.min(ttl, 1_000)) });
      return entry;
    } catch {
      return hit?.entry;
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    async authenticate(authorization) {
      const key = bearerKey(authorization);
      if (!key) throw missingKey();
      const digest = createHmac("sha256", opts.pepper).update(key, "utf8").digest();
      const hex = digest.toString("hex");
      const entry = local.get(hex) ?? (await fromRedis(hex));
      if (!entry || !timingSafeEqual(entry.digest, digest) || entry.disabled) throw invalidKey();
      return entry.record;
    },
  };
}

function toRecord(k: Partial<ApiKeyConfig> & { id: string }): ApiKeyRecord {
  const n = (v: unknown) => (typeof v === "number" && v > 0 ? v : undefined);
  const r: ApiKeyRecord = { id: k.id, requestsPerMinute: n(k.requestsPerMinute), tokensPerMinute: n(k.tokensPerMinute) };
  if (Array.isArray(k.models) && k.models.every((m) => typeof m === "string")) r.models = k.models;
  if (typeof k.priority === "number" && Number.isInteger(k.priority)) r.priority = k.priority;
  return r;
}
