/**
 * The Responses API's conversation items and their chat-completions form. A request's `input` (a string or a list
 * of items) is checked and normalized here (each item typed and given an id, as the API lists them back); stored
 * items, input and output alike, become chat messages for the chat template: messages as they are, `function_call`
 * items as the assistant's `tool_calls`, `function_call_output` items as `tool` messages. Reasoning items are
 * dropped (chat templates leave earlier turns' thinking out).
 *
 * @example
 * const items = parseInput([{ role: "user", content: "hi" }]);
 * itemsToMessages(items); // [{ role: "user", content: "hi" }]
 */
import { badRequest } from "../errors";
import { isObject, type Json } from "../openai/fields";

/** An input or output item as the API writes it (`type` always set; `id` on every item the gateway lists). */
export type Item = Json & { type: string };

const MESSAGE_ROLES = new Set(["user", "system", "developer", "assistant"]);

// Item ids: 32 random hex digits per process, then a counter: unique across replicas and restarts without a random
// draw per id (one cost ~3 us here). Not secret; a response's own id is (randomId): without auth it is what keeps
// one caller from reading another's stored responses.
const processPart = Array.from(crypto.getRandomValues(new Uint8Array(16)), (x) => x.toString(16).padStart(2, "0")).join("");
let idCounter = 0;

/** A response's id: the prefix and 48 random hex digits (unguessable, as OpenAI's). */
export function randomId(prefix: string): string {
  return `${prefix}_${Array.from(crypto.getRandomValues(new Uint8Array(24)), (x) => x.toString(16).padStart(2, "0")).join("")}`;
}

/** Item ids like OpenAI's: a prefix and 48 hex digits. */
export function newItemId(prefix: string): string {
  return `${prefix}_${processPart}${(idCounter++).toString(16).padStart(16, "0")}`;
}

/** A message's content as one text: a string, or text parts (input_text, output_text, refusal) joined by "\n". */
function contentText(content: unknown, param: string): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw badRequest(`'${param}' must be a string or an array of content parts.`, param, "invalid_type");
  const texts: string[] = [];
  content.forEach((part, i) => {
    const p = `${param}[${i}]`;
    if (!isObject(part)) throw badRequest(`'${p}' must be an object.`, p, "invalid_type");
    if ((part.type === "input_text" || part.type === "output_text" || part.type === "text") && typeof part.text === "string") texts.push(part.text);
    else if (part.type === "refusal" && typeof part.refusal === "string") texts.push(part.refusal);
    else throw badRequest(`'${p}.type' ${JSON.stringify(part.type)} is not supported: only text content parts are (input_text, output_text, refusal).`, `${p}.type`, "unsupported_value");
  });
  return texts.join("\n");
}

function reqField(item: Json, key: string, param: string): string {
  const v = item[key];
  if (typeof v !== "string") throw badRequest(`'${param}.${key}' must be a string.`, `${param}.${key}`, v === undefined ? "missing_required_parameter" : "invalid_type");
  return v;
}

/** One input item checked and normalized (an id added when it has none). */
function parseItem(raw: unknown, param: string): Item {
  if (!isObject(raw)) throw badRequest(`'${param}' must be an object.`, param, "invalid_type");
  const type = raw.type ?? (raw.role !== undefined ? "message" : undefined);
  switch (type) {
    case "message": {
      const role = raw.role;
      if (typeof role !== "string" || !MESSAGE_ROLES.has(role)) {
        throw badRequest(`'${param}.role' must be one of user, system, developer, assistant; got ${JSON.stringify(role)}.`, `${param}.role`);
      }
      const text = contentText(raw.content, `${param}.content`);
      const part = role === "assistant" ? { type: "output_text", text, annotations: [] } : { type: "input_text", text };
      return { id: typeof raw.id === "string" ? raw.id : newItemId("msg"), type: "message", role, content: [part], status: "completed" };
    }
    case "function_call":
      return {
        id: typeof raw.id === "string" ? raw.id : newItemId("fc"),
        type: "function_call",
        call_id: reqField(raw, "call_id", param),
        name: reqField(raw, "name", param),
        arguments: reqField(raw, "arguments", param),
        status: "completed",
      };
    case "function_call_output": {
      const output = raw.output;
      return {
        id: typeof raw.id === "string" ? raw.id : newItemId("fco"),
        type: "function_call_output",
        call_id: reqField(raw, "call_id", param),
        output: typeof output === "string" ? output : contentText(output, `${param}.output`),
        status: "completed",
      };
    }
    case "reasoning":
      // kept in the record (listed back), never shown to the template
      return { ...raw, type: "reasoning", id: typeof raw.id === "string" ? raw.id : newItemId("rs") };
    default:
      throw badRequest(
        `'${param}.type' ${JSON.stringify(type)} is not supported: input items are messages, function_call, function_call_output and reasoning.`,
        `${param}.type`,
        "unsupported_value",
      );
  }
}

/** `input`: a string (one user message) or a non-empty list of items. */
export function parseInput(input: unknown): Item[] {
  if (typeof input === "string") return [parseItem({ role: "user", content: input }, "input")];
  if (!Array.isArray(input) || input.length === 0) {
    throw badRequest("'input' must be a string or a non-empty array of items.", "input", input === undefined ? "missing_required_parameter" : "invalid_value");
  }
  return input.map((it, i) => parseItem(it, `input[${i}]`));
}

/** Items (normalized: parsed input or a response's output) as chat messages, in order. */
export function itemsToMessages(items: readonly Item[]): Json[] {
  const out: Json[] = [];
  for (const it of items) {
    if (it.type === "message") {
      out.push({ role: it.role, content: contentText(it.content, "content") });
    } else if (it.type === "function_call") {
      const call = { id: it.call_id, type: "function", function: { name: it.name, arguments: it.arguments } };
      const last = out.at(-1);
      // calls right after the assistant's text (or its other calls) belong to that message
      if (last?.role === "assistant") ((last.tool_calls ??= []) as unknown[]).push(call);
      else out.push({ role: "assistant", content: "", tool_calls: [call] });
    } else if (it.type === "function_call_output") {
      out.push({ role: "tool", tool_call_id: it.call_id, content: it.output });
    }
  }
  return out;
}
