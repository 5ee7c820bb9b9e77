/**
 * A Batch API input file: JSONL, one request per line, `{"custom_id": ..., "method": "POST", "url": <the batch's
 * endpoint>, "body": {...}}`. Checked whole before anything runs, as OpenAI's validation does: every problem is
 * reported with its line (1-based), and a file with any is not run. Pure.
 *
 * @example
 * const { lines, errors } = parseBatchLines(text, "/v1/chat/completions", 50_000);
 */
import { isObject, type Json } from "../openai/fields";

export interface BatchLine {
  customId: string;
  body: Json;
}

export interface BatchLineError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

/** Endpoints a batch may target (the gateway's generation routes, and embeddings for OpenAI-HTTP backends). */
export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"];

export function parseBatchLines(text: string, endpoint: string, maxRequests: number): { lines: BatchLine[]; errors: BatchLineError[] } {
  const lines: BatchLine[] = [];
  const errors: BatchLineError[] = [];
  const seen = new Set<string>();
  const err = (line: number, code: string, message: string, param: string | null = null) => {
    if (errors.length < 100) errors.push({ code, message, param, line });
  };
  const rows = text.split("\n");
  rows.forEach((row, i) => {
    const n = i + 1;
    if (row.trim() === "") return;
    let v: unknown;
    try {
      v = JSON.parse(row);
    } catch {
      return err(n, "invalid_json", "The line is not valid JSON.");
    }
    if (!isObject(v)) return err(n, "invalid_json", "The line is not a JSON object.");
    if (typeof v.custom_id !== "string" || v.custom_id === "") return err(n, "missing_required_parameter", "'custom_id' must be a non-empty string.", "custom_id");
    if (seen.has(v.custom_id)) return err(n, "duplicate_custom_id", `The custom_id '${v.custom_id}' is used by an earlier line.`, "custom_id");
    seen.add(v.custom_id);
    if (v.method !== "POST") return err(n, "invalid_value", "'method' must be \"POST\".", "method");
    if (v.url !== endpoint) return err(n, "mismatched_url", `'url' must be the batch's endpoint ${endpoint}, got ${JSON.stringify(v.url)}.`, "url");
    if (!isObject(v.body)) return err(n, "invalid_value", "'body' must be an object.", "body");
    if (v.body.stream === true) return err(n, "invalid_value", "'body.stream' cannot be true in a batch.", "body.stream");
    lines.push({ customId: v.custom_id, body: v.body });
  });
  if (lines.length === 0 && errors.length === 0) errors.push({ code: "empty_file", message: "The input file has no requests.", param: null, line: null });
  if (lines.length > maxRequests) errors.push({ code: "too_many_requests", message: `The input file has ${lines.length} requests; at most ${maxRequests} (batches.max_requests).`, param: null, line: null });
  return { lines, errors };
}
