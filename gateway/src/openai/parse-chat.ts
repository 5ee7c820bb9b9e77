/**
 * Validates a `POST /v1/chat/completions` body into a GenerationRequest.
 * Messages of every role; content as a string or an array of text parts.
 *
 * @example
 * const req = parseChatRequest('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
 */
import { badRequest } from "../errors";
import { isObject, type Json, optBool, optInt, optString } from "./fields";
import { MAX_TOP_LOGPROBS, parseCommon, parseJsonObject } from "./parse-common";
import type { ChatMessage, GenerationRequest } from "./request";

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

function flattenContent(content: unknown, param: string, role: string): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) {
    if (role === "assistant") return "";
    throw badRequest(`'${param}' is required for role '${role}'.`, param, "missing_required_parameter");
  }
  if (!Array.isArray(content)) throw badRequest(`'${param}' must be a string or an array of content parts.`, param, "invalid_type");
  const texts: string[] = [];
  for (let i = 0; i < content.length; i++) {
    const part = content[i];
    const p = `${param}[${i}]`;
    if (!isObject(part)) throw badRequest(`'${p}' must be an object.`, p, "invalid_type");
    if (part.type === "text" || part.type === "input_text") {
      if (typeof part.text !== "string") throw badRequest(`'${p}.text' must be a string.`, `${p}.text`, "invalid_type");
      texts.push(part.text);
    } else if (part.type === "refusal" && role === "assistant" && typeof part.refusal === "string") {
      texts.push(part.refusal);
    } else {
      throw badRequest(`'${p}.type' ${JSON.stringify(part.type)} is not supported: only text content parts are.`, `${p}.type`, "unsupported_value");
    }
  }
  return texts.join("\n");
}

function parseMessage(m: unknown, i: number): ChatMessage {
  const param = `messages[${i}]`;
  if (!isObject(m)) throw badRequest(`'${param}' must be an object.`, param, "invalid_type");
  const role = m.role;
  if (typeof role !== "string" || !ROLES.has(role)) {
    throw badRequest(`'${param}.role' must be one of system, developer, user, assistant, tool; got ${JSON.stringify(role)}.`, `${param}.role`);
  }
  const msg: ChatMessage = { role: role as ChatMessage["role"], content: flattenContent(m.content, `${param}.content`, role) };
  const name = optString(m, "name");
  if (name !== undefined) msg.name = name;
  if (role === "assistant" && m.tool_calls !== undefined && m.tool_calls !== null) {
    if (!Array.isArray(m.tool_calls)) throw badRequest(`'${param}.tool_calls' must be an array.`, `${param}.tool_calls`, "invalid_type");
    msg.tool_calls = m.tool_calls;
  }
  if (role === "tool") {
    const id = optString(m, "tool_call_id");
    if (id === undefined) throw badRequest(`'${param}.tool_call_id' is required for role 'tool'.`, `${param}.tool_call_id`, "missing_required_parameter");
    msg.tool_call_id = id;
  }
  return msg;
}

/** `tools` (function definitions) and `tool_choice`; tools are dropped when the choice is "none". */
function parseTools(body: Json): { tools?: unknown[]; toolChoice?: GenerationRequest["toolChoice"] } {
  const raw = body.tools;
  let tools: unknown[] | undefined;
  if (raw !== undefined && raw !== null) {
    if (!Array.isArray(raw)) throw badRequest("'tools' must be an array.", "tools", "invalid_type");
    raw.forEach((t, i) => {
      const f = isObject(t) ? t.function : undefined;
      if (!isObject(t) || t.type !== "function" || !isObject(f) || typeof f.name !== "string" || f.name === "") {
        throw badRequest(`'tools[${i}]' must be {"type": "function", "function": {"name": ..., ...}}.`, `tools[${i}]`, "invalid_value");
      }
    });
    if (raw.length > 0) tools = raw;
  }
  const c = body.tool_choice;
  if (c === undefined || c === null || c === "auto") return { tools, toolChoice: tools ? "auto" : undefined };
  if (c === "none") return { toolChoice: "none" };
  if (c === "required" || (isObject(c) && c.type === "function" && isObject(c.function) && typeof c.function.name === "string")) {
    if (!tools) throw badRequest("'tool_choice' asks for a tool call but 'tools' is empty.", "tool_choice");
    if (c === "required") return { tools, toolChoice: "required" };
    const name = (c.function as Json).name as string;
    if (!tools.some((t) => ((t as Json).function as Json).name === name)) throw badRequest(`'tool_choice' names '${name}', which is not in 'tools'.`, "tool_choice");
    return { tools, toolChoice: { name } };
  }
  throw badRequest(`'tool_choice' must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.`, "tool_choice");
}

export function parseChatRequest(rawBody: string, body: Json = parseJsonObject(rawBody)): GenerationRequest {
  const common = parseCommon(body);
  const raw = body.messages;
  if (!Array.isArray(raw) || raw.length === 0) {
    throw badRequest("'messages' must be a non-empty array.", "messages", raw === undefined ? "missing_required_parameter" : "invalid_value");
  }
  const messages = raw.map(parseMessage);
  const { tools, toolChoice } = parseTools(body);
  const parallelToolCalls = optBool(body, "parallel_tool_calls");
  const wantLogprobs = optBool(body, "logprobs") ?? false;
  const top = optInt(body, "top_logprobs", 0, MAX_TOP_LOGPROBS);
  if (top !== undefined && !wantLogprobs) throw badRequest("'top_logprobs' requires 'logprobs' to be true.", "top_logprobs");
  const logprobs = wantLogprobs ? { top: top ?? 0 } : undefined;
  const rf = body.response_format;
  let jsonObject: boolean | undefined;
  let jsonSchema: string | undefined;
  if (rf !== undefined && rf !== null) {
    if (!isObject(rf) || typeof rf.type !== "string") throw badRequest("'response_format' must be an object with a 'type'.", "response_format", "invalid_type");
    if (rf.type === "json_object") jsonObject = true;
    else if (rf.type === "json_schema") {
      const js = rf.json_schema;
      if (!isObject(js) || !isObject(js.schema)) throw badRequest("'response_format.json_schema.schema' must be an object (a JSON Schema).", "response_format.json_schema.schema");
      jsonSchema = JSON.stringify(js.schema);
    }
    else if (rf.type !== "text") throw badRequest(`'response_format.type' must be "text", "json_object" or "json_schema", got ${JSON.stringify(rf.type)}.`, "response_format.type");
  }
  const kw = body.chat_template_kwargs;
  if (kw !== undefined && kw !== null && !isObject(kw)) throw badRequest("'chat_template_kwargs' must be an object.", "chat_template_kwargs", "invalid_type");
  const addGenerationPrompt = optBool(body, "add_generation_prompt");
  const continueFinalMessage = optBool(body, "continue_final_message");
  if (continueFinalMessage) {
    if (messages.at(-1)!.role !== "assistant") throw badRequest("'continue_final_message' needs the last message to be the assistant's.", "continue_final_message");
    if (addGenerationPrompt) throw badRequest("'continue_final_message' and 'add_generation_prompt' cannot both be true.", "continue_final_message");
  }
  return {
    endpoint: "chat",
    ...common,
    messages,
    tools,
    toolChoice,
    parallelToolCalls,
    templateKwargs: isObject(kw) ? kw : undefined,
    addGenerationPrompt,
    continueFinalMessage,
    jsonObject,
    jsonSchema,
    logprobs,
    rawBody,
  };
}
