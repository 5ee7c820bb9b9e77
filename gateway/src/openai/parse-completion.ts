/**
 * Validates a `POST /v1/completions` body. The prompt is a string or token ids
 * (one prompt per request; batches of prompts are refused with a 400).
 *
 * @example
 * const req = parseCompletionRequest('{"model":"m","prompt":"Once upon"}');
 */
import { badRequest } from "../errors";
import { bestOf, type Json, optBool, optInt, optString } from "./fields";
import { MAX_TOP_LOGPROBS, parseCommon, parseJsonObject } from "./parse-common";
import type { GenerationRequest } from "./request";

function isTokenArray(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((x) => Number.isInteger(x) && x >= 0);
}

function parsePrompt(v: unknown): string | number[] {
  if (typeof v === "string") return v;
  if (isTokenArray(v)) return v;
  if (Array.isArray(v) && v.length === 1 && (typeof v[0] === "string" || isTokenArray(v[0]))) return v[0] as string | number[];
  if (Array.isArray(v) && v.length > 1) {
    throw badRequest("'prompt' holds several prompts: send one prompt per request.", "prompt", "unsupported_value");
  }
  throw badRequest("'prompt' must be a string or an array of token ids.", "prompt", v === undefined ? "missing_required_parameter" : "invalid_type");
}

export function parseCompletionRequest(rawBody: string, body: Json = parseJsonObject(rawBody)): GenerationRequest {
  const common = parseCommon(body);
  bestOf(body, common.n, common.passthroughOnly);
  const prompt = parsePrompt(body.prompt);
  if (optBool(body, "echo")) common.passthroughOnly.push("echo");
  const suffix = optString(body, "suffix");
  if (suffix) common.passthroughOnly.push("suffix");
  // logprobs: N returns every token's log-probability and its N best alternatives (0 included: the tokens' own)
  const top = optInt(body, "logprobs", 0, MAX_TOP_LOGPROBS);
  return { endpoint: "completions", ...common, prompt, logprobs: top === undefined ? undefined : { top }, rawBody };
}
