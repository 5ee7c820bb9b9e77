/**
 * Validates a `POST /v1/responses` body and translates it into a chat-completions body, which then takes the
 * gateway's one generation path (parse-chat.ts, routing, every backend kind). What the Responses API adds over
 * chat (instructions, input items, stored conversations) is resolved here and in the handler; what no backend
 * behind a chat endpoint can honour (built-in tools, prompt templates,
 * truncation "auto") is a 400 that names the parameter, never silently dropped.
 *
 * @example
 * const r = parseResponsesRequest({ model: "m", input: "hi", instructions: "Be brief." });
 * const chat = chatBody(r, []); // {model, messages: [system, user], ...}
 */
import { badRequest } from "../errors";
import { eachObject, isObject, type Json, optBool, optInt, optNumber, optString, reqString } from "../openai/fields";
import { MAX_TOP_LOGPROBS } from "../openai/parse-common";
import { type Item, itemsToMessages, parseInput } from "./items";

export interface ResponsesRequest {
  model: string;
  stream: boolean;
  /** Keep the response for GET and `previous_response_id` (the API's default: true). */
  store: boolean;
  /** Run it apart from the request: answered at once (queued), polled with GET, cancellable. */
  background: boolean;
  /** The conversation it runs in: its items first; its input and output appended once it ends. */
  conversationId?: string;
  previousResponseId?: string;
  /** A system message before the conversation; not carried to later responses (as the API does). */
  instructions?: string;
  /** This request's input items, normalized (ids added). */
  input: Item[];
  /** The request's settings the Response object echoes (tools, tool_choice, text, reasoning, ...). */
  echo: Json;
  /** The chat-completions body less its `messages`. */
  chat: Json;
}

/** Sampling and scheduling fields vLLM's chat endpoint takes beyond OpenAI's, passed on as they are. */
const CHAT_EXTRAS = ["top_k", "seed", "stop", "min_tokens", "ignore_eos", "stop_token_ids", "priority", "logit_bias", "frequency_penalty", "presence_penalty", "chat_template_kwargs"];

/** `include` values the gateway knows; only the first changes the output (logprobs), the others have nothing to add. */
const INCLUDES = new Set(["message.output_text.logprobs", "reasoning.encrypted_content", "message.input_image.image_url", "computer_call_output.output.image_url", "file_search_call.results", "web_search_call.results", "web_search_call.action.sources", "code_interpreter_call.outputs"]);

function refuse(param: string, why: string): never {
  throw badRequest(`'${param}' ${why}`, param, "unsupported_parameter");
}

/** Function tools in the chat form; other tool types (built-in, MCP, custom) are refused. */
function chatTools(raw: unknown): Json[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  return eachObject(raw, "tools", (t, p) => {
    if (t.type !== "function") throw badRequest(`'${p}.type' ${JSON.stringify(t.type)} is not supported: only function tools are.`, `${p}.type`, "unsupported_value");
    if (typeof t.name !== "string" || t.name === "") throw badRequest(`'${p}.name' must be a non-empty string.`, `${p}.name`);
    const fn: Json = { name: t.name };
    if (typeof t.description === "string") fn.description = t.description;
    if (isObject(t.parameters)) fn.parameters = t.parameters;
    if (typeof t.strict === "boolean") fn.strict = t.strict;
    return { type: "function", function: fn };
  });
}

function chatToolChoice(c: unknown): unknown {
  if (c === undefined || c === null || c === "auto" || c === "none" || c === "required") return c ?? undefined;
  if (isObject(c) && c.type === "function" && typeof c.name === "string") return { type: "function", function: { name: c.name } };
  throw badRequest(`'tool_choice' must be "none", "auto", "required" or {"type": "function", "name": ...}.`, "tool_choice");
}

/** `text.format` as chat's `response_format`. */
function chatResponseFormat(text: unknown): Json | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isObject(text)) throw badRequest("'text' must be an object.", "text", "invalid_type");
  const f = text.format;
  if (f === undefined || f === null) return undefined;
  if (!isObject(f)) throw badRequest("'text.format' must be an object with a 'type'.", "text.format", "invalid_type");
  if (f.type === "text") return undefined;
  if (f.type === "json_object") return { type: "json_object" };
  if (f.type === "json_schema") {
    if (!isObject(f.schema)) throw badRequest("'text.format.schema' must be an object (a JSON Schema).", "text.format.schema");
    const js: Json = { name: typeof f.name === "string" ? f.name : "response", schema: f.schema };
    if (typeof f.strict === "boolean") js.strict = f.strict;
    if (typeof f.description === "string") js.description = f.description;
    return { type: "json_schema", json_schema: js };
  }
  throw badRequest(`'text.format.type' must be "text", "json_object" or "json_schema", got ${JSON.stringify(f.type)}.`, "text.format.type");
}

/** `metadata`: at most 16 string values, keys up to 64 characters, values up to 512 (the API's bounds). */
export function parseMetadata(v: unknown): Record<string, string> | null {
  if (v === undefined || v === null) return null;
  if (!isObject(v)) throw badRequest("'metadata' must be an object of strings.", "metadata", "invalid_type");
  const keys = Object.keys(v);
  if (keys.length > 16) throw badRequest(`'metadata' has ${keys.length} keys; at most 16.`, "metadata");
  for (const k of keys) {
    const s = v[k];
    if (k.length > 64 || typeof s !== "string" || s.length > 512) throw badRequest(`'metadata.${k}': keys up to 64 characters, values strings up to 512.`, "metadata");
  }
  return v as Record<string, string>;
}

export function parseResponsesRequest(body: Json): ResponsesRequest {
  const model = reqString(body, "model");
  const stream = optBool(body, "stream") ?? false;
  const background = optBool(body, "background") ?? false;
  const conv = body.conversation;
  let conversationId: string | undefined;
  if (conv !== undefined && conv !== null) {
    conversationId = typeof conv === "string" ? conv : isObject(conv) && typeof conv.id === "string" ? conv.id : undefined;
    if (!conversationId) throw badRequest("'conversation' must be a conversation id or {\"id\": ...}.", "conversation", "invalid_type");
    if (body.previous_response_id !== undefined && body.previous_response_id !== null) throw badRequest("'conversation' and 'previous_response_id' cannot both be set.", "conversation");
  }
  if (body.prompt !== undefined && body.prompt !== null) refuse("prompt", "(a stored prompt template) is not supported: send 'instructions' and 'input'.");
  const truncation = optString(body, "truncation");
  if (truncation !== undefined && truncation !== "disabled") refuse("truncation", `"${truncation}" is not supported: only "disabled" (a conversation longer than the context is a 400).`);
  if (body.max_tool_calls !== undefined && body.max_tool_calls !== null) refuse("max_tool_calls", "is not supported: use 'parallel_tool_calls': false for at most one call.");
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== "string") {
    throw badRequest("'instructions' must be a string.", "instructions", "invalid_type");
  }
  const instructions = (body.instructions as string | null | undefined) ?? undefined;
  const input = parseInput(body.input);
  const previousResponseId = optString(body, "previous_response_id");
  const store = optBool(body, "store") ?? true;
  if (background && !store) throw badRequest("'background' needs 'store': a background response is read back with GET.", "store");
  if (background && stream) refuse("background", "with 'stream' is not supported: poll the response with GET.");

  const include = body.include;
  if (include !== undefined && include !== null) {
    if (!Array.isArray(include) || include.some((s) => typeof s !== "string")) throw badRequest("'include' must be an array of strings.", "include", "invalid_type");
    for (const s of include as string[]) if (!INCLUDES.has(s)) throw badRequest(`'include' value ${JSON.stringify(s)} is not known.`, "include");
  }
  const topLogprobs = optInt(body, "top_logprobs", 0, MAX_TOP_LOGPROBS);
  const logprobs = (Array.isArray(include) && include.includes("message.output_text.logprobs")) || topLogprobs !== undefined;

  const chat: Json = { model, stream };
  if (stream) chat.stream_options = { include_usage: true };
  const maxOutput = optInt(body, "max_output_tokens", 1, 0xffff_ffff);
  if (maxOutput !== undefined) chat.max_completion_tokens = maxOutput;
  const temperature = optNumber(body, "temperature", 0, 2);
  const topP = optNumber(body, "top_p", 0, 1);
  if (temperature !== undefined) chat.temperature = temperature;
  if (topP !== undefined) chat.top_p = topP;
  const tools = chatTools(body.tools);
  if (tools?.length) chat.tools = tools;
  const toolChoice = chatToolChoice(body.tool_choice);
  if (toolChoice !== undefined) chat.tool_choice = toolChoice;
  const parallel = optBool(body, "parallel_tool_calls");
  if (parallel !== undefined) chat.parallel_tool_calls = parallel;
  const format = chatResponseFormat(body.text);
  if (format) chat.response_format = format;
  if (logprobs) {
    chat.logprobs = true;
    chat.top_logprobs = topLogprobs ?? 0;
  }
  const user = optString(body, "safety_identifier") ?? optString(body, "user");
  if (user !== undefined) chat.user = user;
  const cacheKey = optString(body, "prompt_cache_key");
  if (cacheKey !== undefined) chat.prompt_cache_key = cacheKey;
  for (const k of CHAT_EXTRAS) if (body[k] !== undefined && body[k] !== null) chat[k] = body[k];
  const reasoning = body.reasoning;
  if (reasoning !== undefined && reasoning !== null && !isObject(reasoning)) throw badRequest("'reasoning' must be an object.", "reasoning", "invalid_type");

  const echo: Json = {
    instructions: instructions ?? null,
    max_output_tokens: maxOutput ?? null,
    metadata: parseMetadata(body.metadata),
    parallel_tool_calls: parallel ?? true,
    previous_response_id: previousResponseId ?? null,
    prompt_cache_key: cacheKey ?? null,
    reasoning: isObject(reasoning) ? { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null } : null,
    safety_identifier: optString(body, "safety_identifier") ?? null,
    store,
    temperature: temperature ?? null,
    text: { format: isObject(body.text) && isObject(body.text.format) ? body.text.format : { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: Array.isArray(body.tools) ? body.tools : [],
    top_logprobs: topLogprobs ?? 0,
    top_p: topP ?? null,
    truncation: "disabled",
    user: optString(body, "user") ?? null,
  };
  if (conversationId !== undefined) echo.conversation = { id: conversationId };
  return { model, stream, store, background, conversationId, previousResponseId, instructions, input, echo, chat };
}

/** The chat-completions body: the instructions, then the earlier turns' items, then this input, as messages. */
export function chatBody(r: ResponsesRequest, history: readonly Item[]): Json {
  const messages = itemsToMessages([...history, ...r.input]);
  if (r.instructions !== undefined) messages.unshift({ role: "system", content: r.instructions });
  return { ...r.chat, messages };
}
