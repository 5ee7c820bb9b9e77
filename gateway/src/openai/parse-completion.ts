/**
 * Validates a `POST /v1/completions` body. The prompt is a string or token ids,
 * or a batch of them (up to 256): each prompt's choices follow the previous
 * prompt's, choice `index` = prompt index x n + choice.
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

/** Most prompts in one request (a batch: an array of strings or of token-id arrays). */
export const MAX_PROMPTS = 256;

/** The prompt(s): a string, token ids, or a batch of either (at least one). */
function parsePrompts(v: unknown): (string | number[])[] {
  if (typeof v === "string") return [v];
  if (isTokenArray(v)) return [v];
  if (Array.isArray(v) && v.length > 0 && v.every((p) => typeof p === "string" || isTokenArray(p))) {
    if (v.length > MAX_PROMPTS) throw badRequest(`'prompt' holds ${v.length} prompts; at most ${MAX_PROMPTS} per request.`, "prompt");
    return v as (string | number[])[];
  }
  throw badRequest(
    "'prompt' must be a string, an array of token ids, or an array of either.",
    "prompt",
    v === undefined ? "missing_required_parameter" : "invalid_type",
  );
}

export function parseCompletionRequest(rawBody: string, body: Json = parseJsonObject(rawBody)): GenerationRequest {
  const common = parseCommon(body);
  bestOf(body, common.n, common.passthroughOnly);
  const prompts = parsePrompts(body.prompt);
  const prompt = prompts[0]!;
  const echo = optBool(body, "echo") === true;
  const suffix = optString(body, "suffix");
  if (suffix) common.passthroughOnly.push("suffix");
  // logprobs: N returns every token's log-probability and its N best alternatives (0 included: the tokens' own)
  const top = optInt(body, "logprobs", 0, MAX_TOP_LOGPROBS);
  // echo with logprobs wants the prompt's log-probabilities, which the engine does not compute: OpenAI-HTTP only
  if (echo && top !== undefined) common.passthroughOnly.push("echo");
  return { endpoint: "completions", ...common, prompt, batch: prompts.length > 1 ? prompts : undefined, echo: echo || undefined, logprobs: top === undefined ? undefined : { top }, rawBody };
}
