/**
 * OpenAI streaming chunks as SSE frames, built from JSON fragments
 * precomputed once per response: a content chunk costs one JSON.stringify of
 * the text and one string concatenation. Shapes follow OpenAI's API exactly:
 * `chat.completion.chunk` (first chunk carries the role, last the finish
 * reason, then an optional usage chunk with empty choices) and
 * `text_completion` for the legacy endpoint; every frame is
 * `data: {...}\n\n` and the stream ends with `data: [DONE]\n\n`.
 *
 * @example
 * const enc = createChatChunkEncoder({ id, created, model, includeUsage: true });
 * enc.start() + enc.content("Hel") + enc.finish("stop") + enc.usage(u) + DONE_FRAME;
 */

import type { ToolCall } from "./tool-calls";

export const DONE_FRAME = "data: [DONE]\n\n";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  /** Reasoning models (the gateway's reasoning parser on): the tokens of the thinking block. */
  completion_tokens_details?: { reasoning_tokens: number };
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter";

export interface ChunkEncoder {
  /** First frame (chat: the assistant role); may be "". */
  start(): string;
  content(text: string): string;
  /** A content frame carrying its tokens' `logprobs` value (logprobs.ts). */
  contentWithLogprobs(text: string, logprobs: object): string;
  /** Chat: a frame of the model's thinking (`reasoning_content`, reasoning.ts). */
  reasoning(text: string): string;
  /** Chat: a frame with these whole tool calls, numbered from `first` within the choice (tool-calls.ts). */
  toolCalls(calls: readonly ToolCall[], first: number): string;
  /** `stop`: the stop string that ended it, sent as vLLM's `stop_reason`. */
  finish(reason: FinishReason, stop?: string): string;
  /** The usage frame, or "" unless include_usage was asked for. */
  usage(u: Usage): string;
}

export interface ChunkContext {
  id: string;
  created: number;
  model: string;
  includeUsage: boolean;
  /** The choice these frames belong to (`n` > 1: 0 to n - 1); default 0. */
  index?: number;
}

export function createChatChunkEncoder(ctx: ChunkContext): ChunkEncoder {
  const base = `{"id":${JSON.stringify(ctx.id)},"object":"chat.completion.chunk","created":${ctx.created},"model":${JSON.stringify(ctx.model)},"system_fingerprint":null,"choices":`;
  const head = `data: ${base}[{"index":${ctx.index ?? 0},"delta":`;
  const usageNull = ctx.includeUsage ? `,"usage":null` : "";
  const tail = `,"logprobs":null,"finish_reason":null}]${usageNull}}\n\n`;
  const contentHead = `${head}{"content":`;
  const contentTail = `}${tail}`;
  return {
    start: () => `${head}{"role":"assistant","content":"","refusal":null}${tail}`,
    content: (text) => contentHead + JSON.stringify(text) + contentTail,
    contentWithLogprobs: (text, lp) => `${contentHead}${JSON.stringify(text)}},"logprobs":${JSON.stringify(lp)},"finish_reason":null}]${usageNull}}\n\n`,
    reasoning: (text) => `${head}{"reasoning_content":${JSON.stringify(text)}}${tail}`,
    toolCalls: (calls, first) => `${head}{"tool_calls":${JSON.stringify(calls.map((c, k) => toolCallJson(c, first + k)))}}${tail}`,
    finish: (reason, stop) => `${head}{},"logprobs":null,"finish_reason":"${reason}"${stopReason(stop)}}]${usageNull}}\n\n`,
    usage: (u) => (ctx.includeUsage ? `data: ${base}[],"usage":${JSON.stringify(u)}}\n\n` : ""),
  };
}

/** vLLM's `stop_reason` beside the finish reason when a stop string ended the choice (nothing otherwise). */
const stopReason = (stop: string | undefined) => (stop === undefined ? "" : `,"stop_reason":${JSON.stringify(stop)}`);

/** A tool call as OpenAI writes it: in a streamed delta with its `index` in the choice, in a message without. */
function toolCallJson(c: ToolCall, index?: number) {
  const call = { id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } };
  return index === undefined ? call : { index, ...call };
}

export function createCompletionChunkEncoder(ctx: ChunkContext): ChunkEncoder {
  const base = `{"id":${JSON.stringify(ctx.id)},"object":"text_completion","created":${ctx.created},"model":${JSON.stringify(ctx.model)},"system_fingerprint":null,"choices":`;
  const head = `data: ${base}[{"text":`;
  const usageNull = ctx.includeUsage ? `,"usage":null` : "";
  const index = `,"index":${ctx.index ?? 0}`;
  const tail = `${index},"logprobs":null,"finish_reason":null}]${usageNull}}\n\n`;
  return {
    start: () => "",
    content: (text) => head + JSON.stringify(text) + tail,
    contentWithLogprobs: (text, lp) => `${head}${JSON.stringify(text)}${index},"logprobs":${JSON.stringify(lp)},"finish_reason":null}]${usageNull}}\n\n`,
    reasoning: () => "", // chat only
    toolCalls: () => "", // tools are a chat parameter
    finish: (reason, stop) => `${head}""${index},"logprobs":null,"finish_reason":"${reason}"${stopReason(stop)}}]${usageNull}}\n\n`,
    usage: (u) => (ctx.includeUsage ? `data: ${base}[],"usage":${JSON.stringify(u)}}\n\n` : ""),
  };
}

/**
 * A non-streaming chat completion body; with tool calls, content is null unless the model wrote some; with a
 * reasoning model's thinking split off (reasoning.ts), `reasoning_content` (null when it did not think).
 */
export function chatCompletionBody(
  ctx: Omit<ChunkContext, "includeUsage">,
  text: string,
  finish: FinishReason,
  usage: Usage,
  logprobs: object | null = null,
  extras: { toolCalls?: readonly ToolCall[]; reasoning?: string; stop?: string } = {},
): string {
  const calls = extras.toolCalls ?? [];
  const message: Record<string, unknown> = { role: "assistant", content: calls.length && text.trim() === "" ? null : text, refusal: null };
  if (extras.reasoning !== undefined) message.reasoning_content = extras.reasoning === "" ? null : extras.reasoning;
  if (calls.length) message.tool_calls = calls.map((c) => toolCallJson(c));
  return JSON.stringify({
    id: ctx.id,
    object: "chat.completion",
    created: ctx.created,
    model: ctx.model,
    system_fingerprint: null,
    choices: [{ index: ctx.index ?? 0, message, logprobs, finish_reason: finish, ...(extras.stop !== undefined ? { stop_reason: extras.stop } : {}) }],
    usage,
  });
}

/** A non-streaming text completion body. */
export function completionBody(ctx: Omit<ChunkContext, "includeUsage">, text: string, finish: FinishReason, usage: Usage, logprobs: object | null = null, stop?: string): string {
  return JSON.stringify({
    id: ctx.id,
    object: "text_completion",
    created: ctx.created,
    model: ctx.model,
    system_fingerprint: null,
    choices: [{ text, index: ctx.index ?? 0, logprobs, finish_reason: finish, ...(stop !== undefined ? { stop_reason: stop } : {}) }],
    usage,
  });
}

const idPrefix = Math.random().toString(36).slice(2, 10);
let idCounter = 0;

/** Unique response ids without a random draw per request: a per-process prefix and a counter. */
export function newResponseId(endpoint: "chat" | "completions"): string {
  return `${endpoint === "chat" ? "chatcmpl" : "cmpl"}-${idPrefix}${(idCounter++).toString(36)}`;
}

/** The SSE frame for an error after streaming began. */
export function errorFrame(body: unknown): string {
  return `data: ${JSON.stringify(body)}\n\n`;
}
