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

/**
 * An array of objects, each given to `each` with its parameter name (`param[i]`); a 400 naming the field when `v` is
 * not an array or an element not an object.
 */
export function eachObject<T>(v: unknown, param: string, each: (o: Json, p: string) => T): T[] {
  if (!Array.isArray(v)) throw badRequest(`'${param}' must be an array.`, param, "invalid_type");
  return v.map((o, i) => {
    const p = `${param}[${i}]`;
    if (!isObject(o)) throw badRequest(`'${p}' must be an object.`, p, "invalid_type");
    return each(o, p);
  });
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

/** Most choices per request (`n`): OpenAI's own bound. */
export const MAX_CHOICES = 128;

/** `n`: how many choices to generate for the one prompt (1 when absent). */
export function choiceCount(body: Json): number {
  return optInt(body, "n", 1, MAX_CHOICES) ?? 1;
}

/**
 * Legacy completions' `best_of`: generate that many and return the `n` with the highest log-probability per token.
 * Equal to `n` (or absent) it asks for nothing more; below `n` it is a 400 (OpenAI's rule); above, only an
 * OpenAI-HTTP backend (vLLM) can rank the candidates, so it goes to `passthroughOnly`.
 */
export function bestOf(body: Json, n: number, passthroughOnly: string[]): void {
  const b = optInt(body, "best_of", 1, MAX_CHOICES);
  if (b === undefined || b === n) return;
  if (b < n) throw badRequest(`'best_of' (${b}) must be at least 'n' (${n}).`, "best_of");
  passthroughOnly.push("best_of");
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
