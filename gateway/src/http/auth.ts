/**
 * Bearer-token check against `auth.api_keys` (`x-api-key` counts as one, for Anthropic's clients). Keys are kept only as SHA-256
 * digests and the presented token is hashed before the lookup, so the
 * comparison does not leak a key's prefix through timing.
 */
import type { MiddlewareHandler } from "hono";
import type { AccessControl } from "../auth/access-control";
import type { ApiKeyRecord } from "../auth/key-store";
import { modelNotFound, unauthorized } from "../errors";

const digest = (s: string) => new Bun.CryptoHasher("sha256").update(s).digest("hex");

/**
 * The request's credentials as an Authorization value: the header, else Anthropic's `x-api-key` (what Anthropic's
 * clients send) as a bearer token.
 */
export function authorizationOf(req: Request): string | undefined {
  const h = req.headers.get("authorization");
  if (h) return h;
  const k = req.headers.get("x-api-key");
  return k ? `Bearer ${k}` : undefined;
}

export function createAuth(apiKeys: readonly string[]): MiddlewareHandler | null {
  if (apiKeys.length === 0) return null;
  const hashes = new Set(apiKeys.map(digest));
  return async (c, next) => {
    if (trusted.has(c.req.raw)) return next();
    const h = authorizationOf(c.req.raw);
    if (!h) throw unauthorized("Missing API key. Send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>').");
    const token = h.startsWith("Bearer ") ? h.slice(7).trim() : "";
    if (!token || !hashes.has(digest(token))) throw unauthorized("Incorrect API key provided.");
    await next();
  };
}

const principals = new WeakMap<Request, ApiKeyRecord>();
/** Requests the gateway made itself (a batch's), already authorized: the auth middlewares let them through. */
const trusted = new WeakMap<Request, string>();

/**
 * Marks a request the gateway itself sends through its app (a batch's line) as its caller's: no credentials are
 * checked, the caller's key (hashed-key auth) is its principal for limits, `owner` its owner.
 */
export function trustRequest(req: Request, owner: string, principal: ApiKeyRecord | undefined): void {
  trusted.set(req, owner);
  if (principal) principals.set(req, principal);
}

/** Whether the request's key may use `model` (a key with a `models` list: only those). */
export function mayUse(req: Request, model: string): boolean {
  const models = principals.get(req)?.models;
  return !models || models.includes(model);
}

/** A 404 for a model this request's key may not use, as for one that does not exist (nothing leaks either way). */
export function checkModelAccess(req: Request, model: string): void {
  if (!mayUse(req, model)) throw modelNotFound(model);
}

/** Whose stored things (responses, files, batches) a request may see: its key's id, a plain key's digest, else "". */
export function ownerOf(req: Request): string {
  const t = trusted.get(req);
  if (t !== undefined) return t;
  const p = principals.get(req);
  if (p) return `key:${p.id}`;
  const h = authorizationOf(req);
  if (h?.startsWith("Bearer ")) return `bearer:${digest(h.slice(7).trim()).slice(0, 32)}`;
  return "";
}

/** The key a request authenticated with (hashed-key auth), for its rate limits. */
export const principalOf = (req: Request): ApiKeyRecord | undefined => principals.get(req);

/** Hashed API keys with per-key limits (`auth.keys`, gateway/src/auth): 401 here, limits in the handler. */
export function createKeyAuth(access: AccessControl): MiddlewareHandler | null {
  if (!access.enabled) return null;
  return async (c, next) => {
    if (trusted.has(c.req.raw)) return next();
    principals.set(c.req.raw, await access.authenticate(authorizationOf(c.req.raw)));
    await next();
  };
}
