/**
 * Renders an engine's token stream as an OpenAI response: SSE frames when
 * streaming, one JSON body otherwise. Pure: the caller feeds engine steps and
 * writes what comes back; `done` turns true on the engine's finish or when a
 * stop string was hit (the caller then cancels the engine call).
 *
 * @example
 * const r = createTokenStreamRenderer({ endpoint: "chat", stream: true, ctx, assembler, promptTokens: 12 });
 * write(r.step([15496], null));
 * write(r.step([0], "stop", { promptTokens: 12, completionTokens: 2, cachedPromptTokens: 0 }));
 */
import {
  chatCompletionBody,
  type ChunkContext,
  type ChunkEncoder,
  completionBody,
  createChatChunkEncoder,
  createCompletionChunkEncoder,
  DONE_FRAME,
  type FinishReason,
  type Usage,
} from "./chunks";
import type { TokenLogprob } from "../rpc/model-client";
import type { LogprobFormatter } from "./logprobs";
import type { TextAssembler } from "./text-assembler";
import { createReasoningSplitter } from "./reasoning";
import { createToolCallParser, type ToolCall } from "./tool-calls";

export interface EngineUsage {
  promptTokens: number;
  completionTokens: number;
  cachedPromptTokens: number;
}

export interface TokenStreamRenderer {
  /**
   * Output for one engine step ("" when nothing is visible yet). logprobs: the step's tokens' (one each), rendered
   * when the options carry a formatter: with the next content frame (text held back carries them along), or in the
   * body when not streaming.
   */
  step(tokenIds: ArrayLike<number>, finish: "stop" | "length" | null, usage?: EngineUsage, logprobs?: readonly TokenLogprob[]): string;
  readonly done: boolean;
  readonly finishReason: FinishReason | null;
  readonly usage: Usage | null;
}

export interface TokenStreamOptions {
  endpoint: "chat" | "completions";
  stream: boolean;
  ctx: ChunkContext;
  assembler: TextAssembler;
  promptTokens: number;
  /** The request asked for log-probabilities: how to render them. */
  logprobs?: LogprobFormatter;
  /**
   * Streaming: end with the usage frame (include_usage) and `[DONE]` (default). false for one choice of several
   * (`n` > 1, choices.ts): the stream that merges them ends once, after every choice finished.
   */
  terminal?: boolean;
  /**
   * Chat with tools on a model whose template announces Hermes tool calls: the calls are parsed out of the text
   * (tool-calls.ts) and sent as `tool_calls` (streamed: a frame per completed call), the finish reason is
   * "tool_calls" when there were any (unless the length ran out). parallel false: calls after the first are dropped.
   */
  toolCalls?: { parallel: boolean };
  /**
   * Chat on a model whose template announces `<think>` blocks: the thinking goes to `reasoning_content` (reasoning.ts;
   * streamed as its own deltas), the answer to content. startInside: the prompt already opened the block.
   */
  reasoning?: { startInside: boolean };
  /** Completions' `echo`: this text (the prompt's) opens the choice's text. */
  echo?: string;
}

export function createTokenStreamRenderer(o: TokenStreamOptions): TokenStreamRenderer {
  const enc: ChunkEncoder | null = o.stream
    ? (o.endpoint === "chat" ? createChatChunkEncoder : createCompletionChunkEncoder)(o.ctx)
    : null;
  let started = false;
  let counted = 0;
  let text = ""; // non-streaming only
  let done = false;
  let finishReason: FinishReason | null = null;
  let usage: Usage | null = null;
  const lpf = o.logprobs;
  let pending: TokenLogprob[] = []; // tokens whose logprobs no frame carried yet (all of them when not streaming)
  const thinking = o.reasoning ? createReasoningSplitter(o.reasoning.startInside) : null;
  let reasoningText = ""; // non-streaming only
  // the tokens of the steps inside the thinking block, those that opened and closed it included; pendingStart: the
  // steps' tokens while it is undecided whether the text opens one (a tag split over tokens, text held back)
  let reasoningTokens = 0;
  let pendingStart = 0;
  const countThinking = (before: string, n: number) => {
    const now = thinking!.phase;
    if (now === "start") pendingStart += n;
    else {
      if (before === "inside" || now === "inside" || (before === "start" && thinking!.opened)) reasoningTokens += pendingStart + n;
      pendingStart = 0;
    }
  };
  const tools = o.toolCalls ? createToolCallParser() : null;
  const calls: ToolCall[] = [];
  /**
   * Visible text through the reasoning splitter and the tool-call parser: the content, and (streaming) frames of
   * reasoning before it and of new calls after it (not streaming, the reasoning and calls are kept for the body).
   */
  const visible = (raw: string, last: boolean): { text: string; before: string; after: string } => {
    let text = raw;
    let before = "";
    if (thinking) {
      const r = thinking.push(raw);
      let reasoning = r.reasoning;
      text = r.content;
      if (last) {
        const f = thinking.finish();
        reasoning += f.reasoning;
        text += f.content;
      }
      if (enc) before = reasoning !== "" ? enc.reasoning(reasoning) : "";
      else reasoningText += reasoning;
    }
    if (!tools) return { text, before, after: "" };
    const r = tools.push(text);
    text = r.content;
    const got = r.calls;
    if (last) text += tools.finish().content;
    const fresh = o.toolCalls!.parallel ? got : got.slice(0, Math.max(0, 1 - calls.length));
    const first = calls.length;
    calls.push(...fresh);
    return { text, before, after: enc && fresh.length ? enc.toolCalls(fresh, first) : "" };
  };
  /** A content frame with the pending tokens' logprobs, when asked for. */
  const content = (text: string) => {
    if (!lpf || pending.length === 0) return enc!.content(text);
    const lp = lpf.value(pending);
    pending = [];
    return enc!.contentWithLogprobs(text, lp);
  };

  function end(engineReason: FinishReason, u: EngineUsage | undefined, rawTail: string, stop?: string): string {
    done = true;
    const { text: tail, before, after } = visible(rawTail, true);
    const reason: FinishReason = calls.length > 0 && engineReason !== "length" ? "tool_calls" : engineReason;
    finishReason = reason;
    const completion = u?.completionTokens || counted;
    usage = {
      prompt_tokens: u?.promptTokens || o.promptTokens,
      completion_tokens: completion,
      total_tokens: (u?.promptTokens || o.promptTokens) + completion,
      prompt_tokens_details: { cached_tokens: u?.cachedPromptTokens ?? 0 },
    };
    if (thinking) usage.completion_tokens_details = { reasoning_tokens: Math.min(reasoningTokens, completion) };
    if (!enc) {
      const full = text + tail;
      const lp = lpf ? lpf.value(pending) : null;
      return o.endpoint === "chat"
        ? chatCompletionBody(o.ctx, full, reason, usage, lp, { toolCalls: calls, reasoning: thinking ? reasoningText : undefined, stop })
        : completionBody(o.ctx, full, reason, usage, lp, stop);
    }
    const last = before + (tail || pending.length > 0 ? content(tail) : "") + after + enc.finish(reason, reason === "stop" ? stop : undefined);
    return o.terminal === false ? last : last + enc.usage(usage) + DONE_FRAME;
  }

  return {
    step(tokenIds, finish, u, logprobs) {
      if (done) return "";
      counted += tokenIds.length;
      if (lpf && logprobs) for (const l of logprobs) pending.push(l);
      let out = "";
      if (!started) {
        started = true;
        if (enc) out = enc.start();
        if (o.echo) {
          if (enc) out += enc.content(o.echo);
          else text += o.echo;
        }
      }
      const phase = thinking?.phase ?? "after";
      const r = o.assembler.push(tokenIds);
      if (r.stopped) {
        if (thinking && phase !== "after") countThinking(phase, tokenIds.length);
        return out + end("stop", u, r.text, r.stop); // out: "" unless streaming
      }
      if (r.text !== "") {
        if (!thinking && !tools) {
          // the common case: the text as it is (no object per step on the token path)
          if (enc) out += content(r.text);
          else text += r.text;
        } else {
          const v = visible(r.text, false);
          if (enc) out += v.before + (v.text !== "" ? content(v.text) : "") + v.after;
          else text += v.text;
        }
      }
      if (thinking && phase !== "after") countThinking(phase, tokenIds.length);
      if (finish !== null) out += end(finish, u, o.assembler.finish());
      return out;
    },
    get done() {
      return done;
    },
    get finishReason() {
      return finishReason;
    },
    get usage() {
      return usage;
    },
  };
}
