/**
 * What a dispatch Generate call carries beyond the prompt and sampling: JSON mode's part (the response format, or a
 * forced tool call, with a reasoning model's thinking allowed first) and the prompt's text for `echo`. Pure over the
 * request and the model's profile.
 *
 * @example
 * const extras = responseFormat(req, profile, "may"); // { jsonSchema, jsonPrefix, jsonSuffix, jsonThinking } or {}
 */
import { badRequest } from "../errors";
import { forcedToolCall } from "../openai/forced-tool-call";
import type { GenerateParams } from "../rpc/model-client";
import type { ModelProfile, PreparedPrompt } from "../tokenize/model-profile";
import type { Tokenizer } from "../tokenize/tokenizer";
import type { Job } from "./backend";

/** The prompt's text for `echo`: as sent, or token ids decoded (special tokens show as nothing, as in the output). */
export function echoText(req: Job["req"], prepared: PreparedPrompt, tokenizer: Tokenizer): string {
  if (typeof req.prompt === "string" && !req.batch) return req.prompt;
  return tokenizer.decode(prepared.tokenIds);
}

/**
 * JSON mode's part of the Generate request: the response format asked for, or a forced tool call (tool_choice
 * "required" or a named function, on a model with Hermes tool calls: forced-tool-call.ts). Both at once is a 400.
 */
export function responseFormat(req: Job["req"], profile: ModelProfile, thinking: GenerateParams["jsonThinking"]): Pick<GenerateParams, "jsonObject" | "jsonSchema" | "jsonPrefix" | "jsonSuffix" | "jsonThinking"> {
  const c = req.toolChoice;
  if (!req.tools || !profile.toolCalls || (c !== "required" && typeof c !== "object")) {
    return req.jsonObject || req.jsonSchema !== undefined ? { jsonObject: req.jsonObject, jsonSchema: req.jsonSchema, jsonThinking: thinking } : {};
  }
  if (req.jsonObject || req.jsonSchema !== undefined) throw badRequest("'response_format' and a 'tool_choice' that forces a call cannot both apply.", "tool_choice");
  const f = forcedToolCall(req.tools, c);
  return { jsonSchema: JSON.stringify(f.schema), jsonPrefix: f.prefix, jsonSuffix: f.suffix, jsonThinking: thinking };
}
