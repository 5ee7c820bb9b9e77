/**
 * Builds an Anthropic Messages API message from a chat completion, streamed or whole, and the API's stream events
 * along the way. Pure: feed it chat chunks (`chunk`) or a chat body (`completion`), then `end`. Reasoning becomes a
 * `thinking` block, content a `text` block, each tool call a `tool_use` block (its arguments streamed as
 * `input_json_delta`s); a change of kind stops the open block and starts the next. The finish maps to `stop_reason`:
 * length `max_tokens`, tool calls `tool_use`, a stop string `stop_sequence` (when the backend names it, as vLLM's
 * `stop_reason` does), else `end_turn`. Usage: `input_tokens` are the prompt's tokens not read from the server's
 * prefix cache, `cache_read_input_tokens` those that were.
 *
 * @example
 * const b = createMessageBuilder({ id: "msg_x", model: "m", stopSequences: [] });
 * send(b.start(12)); for (const c of chunks) send(b.chunk(c)); send(b.end());
 */
import { reasoningOf, toolCallDelta } from "../openai/chat-delta";
import { isObject, type Json } from "../openai/fields";
import { newItemId } from "../responses/items";

export interface AnthropicEvent {
  type: string;
  [k: string]: unknown;
}

export interface MessageBuilder {
  /** `message_start`, with the prompt's tokens when known (dispatch backends know them at the first token). */
  start(inputTokens: number): AnthropicEvent[];
  chunk(c: Json): AnthropicEvent[];
  completion(body: Json): void;
  /** Stops the open block; `message_delta` and `message_stop`, or one `error` event after a failure. */
  end(): AnthropicEvent[];
  readonly failed: { message: string } | null;
  /** The message as it stands (final after `end`). */
  readonly message: Json;
}

type Open =
  | { kind: "thinking"; index: number; block: Json }
  | { kind: "text"; index: number; block: Json }
  | { kind: "tool_use"; index: number; block: Json; args: string; tool: number };

/** A tool call's JSON arguments as the block's `input` object ({} when they are not one). */
function inputOf(args: string): Json {
  try {
    const v = JSON.parse(args === "" ? "{}" : args);
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

export function createMessageBuilder(o: { id: string; model: string; stopSequences: readonly string[] }): MessageBuilder {
  const content: Json[] = [];
  const message: Json = { id: o.id, type: "message", role: "assistant", model: o.model, content, stop_reason: null, stop_sequence: null, usage: null };
  let open: Open | null = null;
  let finish: string | null = null;
  let stopString: string | null = null;
  let usage: Json | null = null;
  let failed: { message: string } | null = null;
  let ended = false;
  const tools = new Map<number, Open & { kind: "tool_use" }>();

  function stop(): AnthropicEvent[] {
    const b = open;
    if (!b) return [];
    open = null;
    if (b.kind === "tool_use") b.block.input = inputOf(b.args);
    return [{ type: "content_block_stop", index: b.index }];
  }

  function begin(next: Open, shown: Json): AnthropicEvent[] {
    const out = stop();
    open = next;
    content.push(next.block);
    out.push({ type: "content_block_start", index: next.index, content_block: shown });
    return out;
  }

  function thinking(text: string): AnthropicEvent[] {
    if (text === "") return [];
    const out: AnthropicEvent[] = [];
    if (open?.kind !== "thinking") out.push(...begin({ kind: "thinking", index: content.length, block: { type: "thinking", thinking: "", signature: "" } }, { type: "thinking", thinking: "", signature: "" }));
    const b = open as Open;
    b.block.thinking += text;
    out.push({ type: "content_block_delta", index: b.index, delta: { type: "thinking_delta", thinking: text } });
    return out;
  }

  function text(t: string): AnthropicEvent[] {
    if (t === "") return [];
    const out: AnthropicEvent[] = [];
    if (open?.kind !== "text") out.push(...begin({ kind: "text", index: content.length, block: { type: "text", text: "", citations: null } }, { type: "text", text: "", citations: null }));
    const b = open as Open;
    b.block.text += t;
    out.push({ type: "content_block_delta", index: b.index, delta: { type: "text_delta", text: t } });
    return out;
  }

  function toolCall(tc: Json, k: number): AnthropicEvent[] {
    const d = toolCallDelta(tc, k);
    const { index, args } = d;
    const out: AnthropicEvent[] = [];
    let b = tools.get(index);
    if (!b) {
      const id = d.id ?? newItemId("toolu");
      const name = d.name ?? "";
      b = { kind: "tool_use", index: content.length, block: { type: "tool_use", id, name, input: {} }, args: "", tool: index };
      tools.set(index, b);
      out.push(...begin(b, { type: "tool_use", id, name, input: {} }));
    } else if (open !== b) return [];
    if (args !== "") {
      b.args += args;
      out.push({ type: "content_block_delta", index: b.index, delta: { type: "input_json_delta", partial_json: args } });
    }
    return out;
  }

  function readUsage(u: unknown): void {
    if (!isObject(u)) return;
    const prompt = Number(u.prompt_tokens ?? 0);
    const cached = isObject(u.prompt_tokens_details) ? Number(u.prompt_tokens_details.cached_tokens ?? 0) : 0;
    usage = { input_tokens: prompt - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: Number(u.completion_tokens ?? 0) };
  }

  function choice(ch: Json, m: Json, whole: boolean): AnthropicEvent[] {
    const out: AnthropicEvent[] = [];
    const r = reasoningOf(m);
    if (r !== undefined) out.push(...thinking(r));
    if (typeof m.content === "string") out.push(...text(m.content));
    if (Array.isArray(m.tool_calls)) {
      (m.tool_calls as Json[]).forEach((tc, k) => {
        if (whole && k > 0) out.push(...stop());
        out.push(...toolCall(tc, k));
      });
    }
    if (typeof ch.finish_reason === "string") finish = ch.finish_reason;
    if (typeof ch.stop_reason === "string") stopString = ch.stop_reason;
    return out;
  }

  const stopReason = () =>
    finish === "length" ? "max_tokens" : finish === "tool_calls" ? "tool_use" : stopString !== null && o.stopSequences.includes(stopString) ? "stop_sequence" : "end_turn";

  return {
    start(inputTokens) {
      return [{ type: "message_start", message: { ...message, content: [], usage: { input_tokens: inputTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 } } }];
    },
    chunk(c) {
      if (ended) return [];
      if (isObject(c.error)) {
        failed = { message: typeof c.error.message === "string" ? c.error.message : "The upstream failed." };
        return [];
      }
      if (c.usage) readUsage(c.usage);
      const ch = Array.isArray(c.choices) ? (c.choices as Json[])[0] : undefined;
      return isObject(ch) ? choice(ch, isObject(ch.delta) ? ch.delta : {}, false) : [];
    },
    completion(body) {
      readUsage(body.usage);
      const ch = Array.isArray(body.choices) ? (body.choices as Json[])[0] : undefined;
      if (!isObject(ch)) failed = { message: "The upstream's completion has no choice." };
      else choice(ch, isObject(ch.message) ? ch.message : {}, true);
    },
    end() {
      if (ended) return [];
      ended = true;
      if (!failed && finish === null) failed = { message: "The upstream stream ended before the message finished." };
      const out = stop();
      if (failed) return [{ type: "error", error: { type: "api_error", message: failed.message } }];
      message.stop_reason = stopReason();
      message.stop_sequence = message.stop_reason === "stop_sequence" ? stopString : null;
      message.usage = usage ?? { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 };
      out.push({ type: "message_delta", delta: { stop_reason: message.stop_reason, stop_sequence: message.stop_sequence }, usage: message.usage }, { type: "message_stop" });
      return out;
    },
    get failed() {
      return failed;
    },
    get message() {
      return message;
    },
  };
}
