/**
 * Fields shared by chat and text completions: model, streaming, sampling,
 * limits, stop conditions, user and routing affinity.
 */
import { badRequest } from "../errors";
import {
  isObject,
  type Json,
  optBool,
  optInt,
  optNumber,
  optString,
  reqString,
  choiceCount,
  stopStrings,
  stopTokenIds,
  streamOptions,
} from "./fields";
import type { GenerationRequest } from "./request";

const UINT32_MAX = 0xffff_ffff;

export type CommonFields = Omit<GenerationRequest, "endpoint" | "messages" | "prompt" | "tools" | "rawBody" | "logprobs">;

/** Most top log-probabilities per token (OpenAI's top_logprobs bound; the model server's too). */
export const MAX_TOP_LOGPROBS = 20;

export function parseCommon(body: Json): CommonFields {
  const model = reqString(body, "model");
  const stream = optBool(body, "stream") ?? false;
  const includeUsage = streamOptions(body, stream);
  const n = choiceCount(body);
  // Token counts travel as uint32 on the wire: larger values are a 400 here, not a 5xx at encoding.
  const maxCompletion = optInt(body, "max_completion_tokens", 1, UINT32_MAX);
  const maxTokens = maxCompletion ?? optInt(body, "max_tokens", 1, UINT32_MAX);
  const seed = optInt(body, "seed", Number.MIN_SAFE_INTEGER);
  const passthroughOnly: string[] = [];
  return {
    model,
    stream,
    includeUsage,
    n,
    maxTokens,
    minTokens: optInt(body, "min_tokens", 0, UINT32_MAX),
    ignoreEos: optBool(body, "ignore_eos"),
    stop: stopStrings(body),
    stopTokenIds: stopTokenIds(body),
    sampling: {
      temperature: optNumber(body, "temperature", 0, 2),
      topP: optNumber(body, "top_p", 0, 1),
      topK: optInt(body, "top_k", -1, UINT32_MAX),
      // The engine takes an unsigned seed; negative seeds map onto it bijectively.
      seed: seed === undefined ? undefined : seed < 0 ? seed + 2 ** 53 : seed,
      frequencyPenalty: optNumber(body, "frequency_penalty", -2, 2),
      presencePenalty: optNumber(body, "presence_penalty", -2, 2),
      logitBias: logitBias(body),
    },
    user: optString(body, "user"),
    priority: optInt(body, "priority", -(2 ** 31), 2 ** 31 - 1),
    affinityKey: optString(body, "prompt_cache_key"),
    passthroughOnly,
  };
}

/** Most `logit_bias` entries (the model server's bound; OpenAI takes 300). */
export const MAX_LOGIT_BIAS = 1024;

/** `logit_bias`: {"token id": bias in [-100, 100]}; ids the vocabulary lacks are the model server's 400. */
function logitBias(body: Json): Record<number, number> | undefined {
  const v = body.logit_bias;
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw badRequest("'logit_bias' must be an object of token ids to biases.", "logit_bias", "invalid_type");
  const keys = Object.keys(v);
  if (keys.length === 0) return undefined;
  if (keys.length > MAX_LOGIT_BIAS) throw badRequest(`'logit_bias' has ${keys.length} entries; at most ${MAX_LOGIT_BIAS}.`, "logit_bias");
  const out: Record<number, number> = {};
  for (const k of keys) {
    if (!/^(0|[1-9][0-9]{0,9})$/.test(k) || Number(k) > UINT32_MAX) throw badRequest(`'logit_bias' keys must be token ids, got ${JSON.stringify(k)}.`, "logit_bias");
    const b = v[k];
    if (typeof b !== "number" || !(b >= -100 && b <= 100)) throw badRequest(`'logit_bias' values must be numbers in [-100, 100], got ${JSON.stringify(b)} for token ${k}.`, "logit_bias");
    out[Number(k)] = b;
  }
  return out;
}

/** Parse the body text as a JSON object or throw a 400. */
export function parseJsonObject(text: string): Json {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw badRequest(`Request body is not valid JSON: ${(err as Error).message}`, null, "invalid_json");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw badRequest("Request body must be a JSON object.", null, "invalid_json");
  }
  return v as Json;
}
