/**
 * API keys are stored as HMAC-SHA256(pepper, key), never in the clear. Keys are
 * long random strings, so a fast keyed hash is enough (no password stretching
 * needed); the pepper lives in a Secret, apart from the hashes, so a leaked
 * config or Redis dump does not let anyone test guesses offline.
 *
 * @example
 * const stored = hashApiKey("sk-live-abc", pepper); // "sha256:3f1c..."
 * apiKeyMatches("sk-live-abc", stored, pepper);    // true, in constant time
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const PREFIX = "sha256:";

/** The stored form of `key`: `sha256:<64 hex>`. */
export function hashApiKey(key: string, pepper: string): string {
  return PREFIX + createHmac("sha256", pepper).update(key, "utf8").digest("hex");
}

/** Parses a stored hash into its 32 digest bytes; throws on anything else. */
export function parseKeyHash(stored: string): Buffer {
  if (!stored.startsWith(PREFIX) || !/^[0-9a-f]{64}$/.test(stored.slice(PREFIX.length)))
    throw new Error(`an API key hash must look like sha256:<64 lowercase hex>, got ${JSON.stringify(stored.slice(0, 12))}...`);
  return Buffer.from(stored.slice(PREFIX.length), "hex");
}

/** Constant-time comparison of a presented key against a stored hash. */
export function apiKeyMatches(key: string, stored: string, pepper: string): boolean {
  const presented = createHmac("sha256", pepper).update(key, "utf8").digest();
  return timingSafeEqual(presented, parseKeyHash(stored));
}

/** A new random key (`sk-dispatch-` + 32 bytes base64url) for operators. */
export function generateApiKey(): string {
  return "sk-dispatch-" + randomBytes(32).toString("base64url");
}

/** Reads the key from `Authorization: Bearer <key>`; undefined when absent or malformed. */
export function bearerKey(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return m?.[1];
}
