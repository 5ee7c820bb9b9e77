/**
 * Reading a chat completion's output (a streamed chunk's delta or a whole message), as the gateway's other API
 * shapes do (responses/output-builder.ts, anthropic/message-builder.ts): from dispatch backends and from vLLM /
 * SGLang servers alike.
 *
 * @example
 * toolCallDelta({ index: 0, id: "call_1", function: { name: "f", arguments: "{" } }, 0); // {index: 0, id, name: "f", args: "{"}
 */
import { isObject, type Json } from "./fields";

/** A tool call's parts: its index in the choice, its id and name (on its first delta), a piece of its arguments. */
export function toolCallDelta(tc: Json, k: number): { index: number; id?: string; name?: string; args: string } {
  const fn = isObject(tc.function) ? tc.function : {};
  return {
    index: typeof tc.index === "number" ? tc.index : k,
    id: typeof tc.id === "string" ? tc.id : undefined,
    name: typeof fn.name === "string" ? fn.name : undefined,
    args: typeof fn.arguments === "string" ? fn.arguments : "",
  };
}

/** The thinking text: `reasoning_content` (dispatch, DeepSeek, older vLLM) or `reasoning` (newer vLLM). */
export function reasoningOf(m: Json): string | undefined {
  const r = m.reasoning_content ?? m.reasoning;
  return typeof r === "string" ? r : undefined;
}
