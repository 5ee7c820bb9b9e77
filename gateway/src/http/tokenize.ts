/**
 * `POST /tokenize` and `POST /detokenize`, vLLM's extensions, for dispatch models (the gateway holds their
 * tokenizer and chat template): /tokenize takes a completions-style `prompt` (a string) or chat `messages` (rendered
 * with the model's template, as a chat request would be, `tools` and `chat_template_kwargs` included) and answers
 * `{count, max_model_len, tokens}`; /detokenize takes `tokens` and answers `{prompt}` (special tokens show as
 * nothing, as in generated text). Errors are OpenAI-shaped 400s / 404s.
 */
import type { Context } from "hono";
import { badRequest, modelNotFound } from "../errors";
import { parseChatRequest } from "../openai/parse-chat";
import { parseCompletionRequest } from "../openai/parse-completion";
import { parseJsonObject } from "../openai/parse-common";
import type { ModelProfile } from "../tokenize/model-profile";
import type { GatewayDeps } from "./deps";
import { checkModelAccess } from "./auth";
import { readBody } from "./read-body";

export function profileOf(deps: GatewayDeps, model: unknown, req?: Request): ModelProfile {
  if (typeof model !== "string" || model === "") throw badRequest("'model' is required.", "model", "missing_required_parameter");
  if (!deps.pool.knows(model)) throw modelNotFound(model);
  if (req) checkModelAccess(req, model);
  const p = deps.pool.profile(model);
  if (!p) throw badRequest(`Model '${model}' is served by an OpenAI-compatible backend: its tokenizer is there, not in the gateway.`, "model", "unsupported_value");
  return p;
}

export function createTokenizeHandler(deps: GatewayDeps) {
  return async (c: Context): Promise<Response> => {
    const raw = await readBody(c.req.raw, deps.config.server.max_body_bytes);
    const body = parseJsonObject(raw);
    const profile = profileOf(deps, body.model, c.req.raw);
    let req;
    if (body.messages !== undefined) req = parseChatRequest(raw, body);
    else if (typeof body.prompt === "string") req = parseCompletionRequest(raw, body);
    else throw badRequest("'prompt' (a string) or 'messages' is required.", "prompt", "missing_required_parameter");
    const ids = profile.prepare(req).tokenIds;
    return c.json({ count: ids.length, max_model_len: profile.maxContext, tokens: Array.from(ids) });
  };
}

export function createDetokenizeHandler(deps: GatewayDeps) {
  return async (c: Context): Promise<Response> => {
    const body = parseJsonObject(await readBody(c.req.raw, deps.config.server.max_body_bytes));
    const profile = profileOf(deps, body.model, c.req.raw);
    const tokens = body.tokens;
    const vocab = profile.tokenizer.vocabSize;
    if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && t >= 0 && t < vocab)) {
      throw badRequest(`'tokens' must be an array of token ids in [0, ${vocab}).`, "tokens", tokens === undefined ? "missing_required_parameter" : "invalid_value");
    }
    return c.json({ prompt: profile.tokenizer.decode(tokens as number[]) });
  };
}
