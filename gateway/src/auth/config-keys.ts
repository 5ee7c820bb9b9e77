/**
 * Parses the `auth.keys` list of the gateway's YAML config (snake_case, as the
 * rest of the file) into key-store entries, refusing anything malformed with
 * the path of the bad field, so the config loader can call it as the check for
 * that key. Also accepts a JSON string (the DISPATCH_AUTH_KEYS variable).
 *
 * @example
 * parseConfigKeys([{ id: "team-a", hash: "sha256:...", requests_per_minute: 600 }], "auth.keys");
 */
import type { ApiKeyConfig } from "./key-store";
import { parseKeyHash } from "./key-hash";

const KNOWN = new Set(["id", "hash", "requests_per_minute", "tokens_per_minute", "disabled", "models", "priority"]);

export function parseConfigKeys(raw: unknown, path = "auth.keys"): ApiKeyConfig[] {
  let list = raw;
  if (typeof raw === "string") {
    try {
      list = raw.trim() === "" ? [] : JSON.parse(raw);
    } catch {
      throw new Error(`config.${path} must be a list (JSON in the environment), got unparsable text`);
    }
  }
  if (!Array.isArray(list)) throw new Error(`config.${path} must be a list of {id, hash, requests_per_minute?, tokens_per_minute?, disabled?, models?, priority?}`);
  const ids = new Set<string>();
  return list.map((k, i) => {
    const at = `config.${path}[${i}]`;
    if (typeof k !== "object" || k === null || Array.isArray(k)) throw new Error(`${at} must be a mapping`);
    const e = k as Record<string, unknown>;
    for (const key of Object.keys(e)) if (!KNOWN.has(key)) throw new Error(`${at}.${key} is not a known key (known: ${[...KNOWN].join(", ")})`);
    if (typeof e.id !== "string" || !e.id) throw new Error(`${at}.id must be a non-empty string`);
    if (ids.has(e.id)) throw new Error(`${at}.id '${e.id}' is used twice`);
    ids.add(e.id);
    if (typeof e.hash !== "string") throw new Error(`${at}.hash must be a string (sha256:<hex> from hash-key-cli.ts; never the key itself)`);
    try {
      parseKeyHash(e.hash);
    } catch (err) {
      throw new Error(`${at}.hash: ${(err as Error).message}`);
    }
    const limit = (name: string): number | undefined => {
      const v = e[name];
      if (v === undefined) return undefined;
      if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new Error(`${at}.${name} must be a whole number >= 0 (0: unlimited), got ${JSON.stringify(v)}`);
      return v || undefined;
    };
    if (e.disabled !== undefined && typeof e.disabled !== "boolean") throw new Error(`${at}.disabled must be true or false`);
    if (e.models !== undefined && (!Array.isArray(e.models) || e.models.some((m) => typeof m !== "string" || m === ""))) throw new Error(`${at}.models must be a list of model names`);
    if (e.priority !== undefined && (typeof e.priority !== "number" || !Number.isInteger(e.priority) || Math.abs(e.priority) > 2 ** 31 - 1)) throw new Error(`${at}.priority must be an integer (int32)`);
    return {
      id: e.id,
      hash: e.hash,
      requestsPerMinute: limit("requests_per_minute"),
      tokensPerMinute: limit("tokens_per_minute"),
      disabled: e.disabled === true,
      ...(e.models !== undefined ? { models: e.models as string[] } : {}),
      ...(e.priority !== undefined ? { priority: e.priority as number } : {}),
    };
  });
}
