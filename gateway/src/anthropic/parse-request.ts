/**
 * Validates an Anthropic Messages API body (`POST /v1/messages`) and translates it into a chat-completions body for
 * the gateway's one generation path. `system` becomes a system message; a user turn's `tool_result` blocks become
 * `tool` messages (before its text, where the API puts them); an assistant turn's `tool_use` blocks become its
 * `tool_calls`; earlier `thinking` blocks are dropped (chat templates leave earlier thinking out). What no chat
 * backend can honour (images, documents, server tools, MCP servers) is a 400 naming the field.
 *
 * @example
 * const r = parseMessagesRequest({ model: "m", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
 * r.chat; // {model, max_completion_tokens: 64, messages: [{role: "user", content: "hi"}], ...}
 */
import { badRequest } from "../errors";
import { eachObject, isObject, type Json, optBool, optInt, optNumber, reqString } from "../openai/fields";

export interface MessagesRequest {
  model: string;
  stream: boolean;
  /** `stop_sequences`: a stop that matched one is reported as `stop_sequence` when the backend says which. */
  stopSequences: string[];
  /** The chat-completions body. */
  chat: Json;
}

/** Most stop sequences (the gateway's stop-string bound). */
const MAX_STOPS = 4;

const unsupported = (param: string, what: string) => badRequest(`'${param}' ${what}`, param, "unsupported_value");

/** Text blocks as one text; other block types refused. */
function blockText(content: unknown, param: string): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw badRequest(`'${param}' must be a string or an array of content blocks.`, param, "invalid_type");
  return content
    .map((b, i) => {
      const p = `${param}[${i}]`;
      if (!isObject(b) || b.type !== "text" || typeof b.text !== "string") throw unsupported(`${p}.type`, "must be a text block here ({\"type\": \"text\", \"text\": ...}).");
      return b.text;
    })
    .join("\n");
}

/** A turn's content blocks (not a string), each with its parameter name. */
function eachBlock(content: unknown, param: string, each: (b: Json, p: string) => void): void {
  if (!Array.isArray(content)) throw badRequest(`'${param}' must be a string or an array of content blocks.`, param, "invalid_type");
  eachObject(content, param, each);
}

function userMessages(content: unknown, param: string): Json[] {
  if (typeof content === "string") return [{ role: "user", content }];
  const tools: Json[] = [];
  const texts: string[] = [];
  eachBlock(content, param, (b, p) => {
    if (b.type === "text" && typeof b.text === "string") texts.push(b.text);
    else if (b.type === "tool_result") {
      if (typeof b.tool_use_id !== "string") throw badRequest(`'${p}.tool_use_id' must be a string.`, `${p}.tool_use_id`, "invalid_type");
      const text = b.content === undefined ? "" : blockText(b.content, `${p}.content`);
      tools.push({ role: "tool", tool_call_id: b.tool_use_id, content: b.is_error === true ? `Error: ${text}` : text });
    } else throw unsupported(`${p}.type`, `${JSON.stringify(b.type)} is not supported in a user turn: text and tool_result blocks are.`);
  });
  return texts.length ? [...tools, { role: "user", content: texts.join("\n") }] : tools;
}

function assistantMessage(content: unknown, param: string): Json {
  if (typeof content === "string") return { role: "assistant", content };
  const texts: string[] = [];
  const calls: Json[] = [];
  eachBlock(content, param, (b, p) => {
    if (b.type === "text" && typeof b.text === "string") texts.push(b.text);
    else if (b.type === "tool_use") {
      if (typeof b.id !== "string" || typeof b.name !== "string") throw badRequest(`'${p}' needs a string 'id' and 'name'.`, p);
      calls.push({ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
    } else if (b.type !== "thinking" && b.type !== "redacted_thinking") {
      throw unsupported(`${p}.type`, `${JSON.stringify(b.type)} is not supported in an assistant turn: text, tool_use and thinking blocks are.`);
    }
  });
  const m: Json = { role: "assistant", content: texts.join("\n") };
  if (calls.length) m.tool_calls = calls;
  return m;
}

function chatTools(raw: unknown): Json[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  return eachObject(raw, "tools", (t, p) => {
    if (t.type !== undefined && t.type !== null && t.type !== "custom") throw unsupported(`${p}.type`, `${JSON.stringify(t.type)} (a server tool) is not supported: only client tools are.`);
    if (typeof t.name !== "string" || t.name === "") throw badRequest(`'${p}.name' must be a non-empty string.`, `${p}.name`);
    if (!isObject(t.input_schema)) throw badRequest(`'${p}.input_schema' must be an object (a JSON Schema).`, `${p}.input_schema`);
    const fn: Json = { name: t.name, parameters: t.input_schema };
    if (typeof t.description === "string") fn.description = t.description;
    return { type: "function", function: fn };
  });
}

/** `tool_choice`: auto, any (some tool), tool (that one), none; `disable_parallel_tool_use`. */
function chatToolChoice(c: unknown, chat: Json): void {
  if (c === undefined || c === null) return;
  if (!isObject(c)) throw badRequest("'tool_choice' must be an object with a 'type'.", "tool_choice", "invalid_type");
  if (c.type === "auto") chat.tool_choice = "auto";
  else if (c.type === "any") chat.tool_choice = "required";
  else if (c.type === "none") chat.tool_choice = "none";
  else if (c.type === "tool" && typeof c.name === "string") chat.tool_choice = { type: "function", function: { name: c.name } };
  else throw badRequest(`'tool_choice' must be {"type": "auto" | "any" | "none"} or {"type": "tool", "name": ...}.`, "tool_choice");
  if (c.disable_parallel_tool_use === true) chat.parallel_tool_calls = false;
}

export function parseMessagesRequest(body: Json): MessagesRequest {
  const model = reqString(body, "model");
  if (body.max_tokens === undefined || body.max_tokens === null) throw badRequest("'max_tokens' is required.", "max_tokens", "missing_required_parameter");
  const maxTokens = optInt(body, "max_tokens", 1, 0xffff_ffff)!;
  const stream = optBool(body, "stream") ?? false;
  for (const k of ["mcp_servers", "container"]) if (body[k] !== undefined && body[k] !== null) throw unsupported(k, "is not supported by this gateway.");
  const raw = body.messages;
  if (!Array.isArray(raw) || raw.length === 0) {
    throw badRequest("'messages' must be a non-empty array.", "messages", raw === undefined ? "missing_required_parameter" : "invalid_value");
  }
  const messages: Json[] = [];
  if (body.system !== undefined && body.system !== null) messages.push({ role: "system", content: blockText(body.system, "system") });
  raw.forEach((m, i) => {
    const p = `messages[${i}]`;
    if (!isObject(m)) throw badRequest(`'${p}' must be an object.`, p, "invalid_type");
    if (m.role === "user") messages.push(...userMessages(m.content, `${p}.content`));
    else if (m.role === "assistant") messages.push(assistantMessage(m.content, `${p}.content`));
    else throw badRequest(`'${p}.role' must be "user" or "assistant"; got ${JSON.stringify(m.role)}.`, `${p}.role`);
  });
  const stops = body.stop_sequences;
  let stopSequences: string[] = [];
  if (stops !== undefined && stops !== null) {
    if (!Array.isArray(stops) || stops.some((s) => typeof s !== "string" || s === "")) throw badRequest("'stop_sequences' must be an array of non-empty strings.", "stop_sequences", "invalid_type");
    if (stops.length > MAX_STOPS) throw badRequest(`'stop_sequences' has ${stops.length} entries; at most ${MAX_STOPS}.`, "stop_sequences");
    stopSequences = stops as string[];
  }

  const chat: Json = { model, stream, max_completion_tokens: maxTokens, messages };
  if (stream) chat.stream_options = { include_usage: true };
  if (stopSequences.length) chat.stop = stopSequences;
  const temperature = optNumber(body, "temperature", 0, 1);
  if (temperature !== undefined) chat.temperature = temperature;
  const topP = optNumber(body, "top_p", 0, 1);
  if (topP !== undefined) chat.top_p = topP;
  const topK = optInt(body, "top_k", 0, 0xffff_ffff);
  if (topK !== undefined) chat.top_k = topK === 0 ? -1 : topK;
  const tools = chatTools(body.tools);
  if (tools?.length) chat.tools = tools;
  chatToolChoice(body.tool_choice, chat);
  const meta = body.metadata;
  if (isObject(meta) && typeof meta.user_id === "string") chat.user = meta.user_id;
  const thinking = body.thinking;
  if (thinking !== undefined && thinking !== null) {
    // a reasoning model's template decides; Qwen3-style templates read enable_thinking
    if (!isObject(thinking) || (thinking.type !== "enabled" && thinking.type !== "disabled")) {
      throw badRequest(`'thinking' must be {"type": "enabled", "budget_tokens": ...} or {"type": "disabled"}.`, "thinking");
    }
    chat.chat_template_kwargs = { enable_thinking: thinking.type === "enabled" };
  }
  return { model, stream, stopSequences, chat };
}
