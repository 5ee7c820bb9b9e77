/**
 * Typed readers for JSON request fields: each returns the value or throws a
 * 400 naming the parameter. Kept tiny and allocation-free on the happy path.
 *
 * @example
 * const t = optNumber(body, "temperature", 0, 2);
 */
import { badRequest } from "../errors";

export type Json = Record<string, unknown>;

function typeName(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

export function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function optNumber(body: Json, key: string, min: number, max: number): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v)) throw badRequest(`'${key}' must be a number, got ${typeName(v)}.`, key, "invalid_type");
  if (v < min || v > max) throw badRequest(`'${key}' must be between ${min} and ${max}, got ${v}.`, key);
  return v;
}

export function optInt(body: Json, key: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = optNumber(body, key, min, max);
  if (v !== undefined && !Number.isInteger(v)) throw badRequest(`'${key}' must be an integer, got ${v}.`, key, "invalid_type");
  return v;
}

export function optBool(body: Json, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw badRequest(`'${key}' must be a boolean, got ${typeName(v)}.`, key, "invalid_type");
  return v;
}

export function optString(body: Json, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw badRequest(`'${key}' must be a string, got ${typeName(v)}.`, key, "invalid_type");
  return v;
}

export function reqString(body: Json, key: string): string {
  const v = optString(body, key);
  if (v === undefined || v === "") throw badRequest(`'${key}' is required.`, key, "missing_required_parameter");
  return v;
}

/** `stop`: a string or an array of up to 4 non-empty strings. */
export function stopStrings(body: Json): string[] {
  const v = body.stop;
  if (v === undefined || v === null) return [];
  const list = typeof v === "string" ? [v] : v;
  if (!Array.isArray(list) || list.some((s) => typeof s !== "string")) {
    throw badRequest("'stop' must be a string or an array of strings.", "stop", "invalid_type");
  }
  if (list.length > 4) throw badRequest(`'stop' accepts at most 4 sequences, got ${list.length}.`, "stop");
  if (list.some((s) => s === "")) throw badRequest("'stop' sequences must not be empty.", "stop");
  return list as string[];
}

/** `n` and `best_of` must be 1 (several choices per request are not implemented). */
export function requireSingleChoice(body: Json, key: "n" | "best_of"): void {
  const n = optInt(body, key, 1, 128);
  if (n !== undefined && n !== 1) {
    throw badRequest(`'${key}' must be 1: several choices per request are not supported; send separate requests.`, key, "unsupported_value");
  }
}

export function streamOptions(body: Json, stream: boolean): boolean {
  const v = body.stream_options;
  if (v === undefined || v === null) return false;
  if (!isObject(v)) throw badRequest("'stream_options' must be an object.", "stream_options", "invalid_type");
  if (!stream) throw badRequest("'stream_options' is only allowed when 'stream' is true.", "stream_options");
  return optBool(v, "include_usage") ?? false;
}

/** vLLM's `stop_token_ids` extension. */
export function stopTokenIds(body: Json): number[] {
  const v = body.stop_token_ids;
  if (v === undefined || v === null) return [];
  // Token ids travel as uint32: anything larger is a 400 here, not a 5xx when the RPC is encoded.
  if (!Array.isArray(v) || v.some((x) => !Number.isInteger(x) || (x as number) < 0 || (x as number) > 0xffff_ffff)) {
    throw badRequest("'stop_token_ids' must be an array of integers in 0..4294967295.", "stop_token_ids", "invalid_type");
  }
  return v as number[];
}
