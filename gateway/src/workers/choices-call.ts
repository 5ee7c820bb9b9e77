/**
 * One response out of several choices (`n` > 1, or a batch of prompts) of a dispatch backend. Each choice is a Call of its own (its own
 * sequence on the model server, its frames carrying its index, its stream ending without usage or `[DONE]`); this
 * merges them into the Call the HTTP layer streams: frames in the order they arrive, then one usage frame (when
 * `include_usage` asked for it) and one `[DONE]`; or, not streaming, one body holding every choice. Usage counts
 * each prompt once (its first choice's, cached tokens included) and the completion tokens of all choices, as OpenAI and vLLM
 * do. A failure of any choice ends the response (every choice's call closed); so does close().
 *
 * @example
 * const call = mergeChoiceCalls([c0, c1, c2], { endpoint: "chat", stream: true, ctx: { id, created, model, includeUsage: true } });
 */
import { createChatChunkEncoder, createCompletionChunkEncoder, DONE_FRAME, type ChunkContext, type Usage } from "../openai/chunks";
import type { Call, CallStats } from "./backend";

export interface ChoicesOptions {
  endpoint: "chat" | "completions";
  stream: boolean;
  ctx: ChunkContext;
  /** The calls whose prompt counts in the usage: each prompt's first choice (default: call 0 alone). */
  promptCalls?: readonly number[];
}

type Pulled = { i: number; ok: true; out: string | Uint8Array | null } | { i: number; ok: false; err: unknown };

const text = (p: string | Uint8Array) => (typeof p === "string" ? p : new TextDecoder().decode(p));

/** The usage of the choices: each prompt's tokens once (its first choice's, cached included), every choice's completion tokens. */
export function choicesUsage(stats: readonly CallStats[], promptCalls: readonly number[] = [0]): Usage {
  const prompt = promptCalls.reduce((n, k) => n + (stats[k]?.promptTokens ?? 0), 0);
  const cached = promptCalls.reduce((n, k) => n + (stats[k]?.cachedPromptTokens ?? 0), 0);
  const completion = stats.reduce((n, s) => n + s.completionTokens, 0);
  const u: Usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } };
  if (stats.some((s) => s.reasoningTokens !== undefined)) u.completion_tokens_details = { reasoning_tokens: stats.reduce((n, s) => n + (s.reasoningTokens ?? 0), 0) };
  return u;
}

/** One non-streaming body from the choices' bodies (each with one choice): choices in index order, usage summed. */
export function mergeChoiceBodies(bodies: readonly string[], usage: Usage): string {
  const parsed = bodies.map((b) => JSON.parse(b) as { choices: { index: number }[] } & Record<string, unknown>);
  const first = parsed[0]!;
  const choices = parsed.flatMap((p) => p.choices).sort((a, b) => a.index - b.index);
  return JSON.stringify({ ...first, choices, usage });
}

export function mergeChoiceCalls(calls: readonly Call[], o: ChoicesOptions): Call {
  const promptCalls = o.promptCalls ?? [0];
  const usage = () => choicesUsage(calls.map((c) => c.stats), promptCalls);
  // the merged call's counters are the response's usage (logs, metrics, rate limits)
  const stats: CallStats = {
    get promptTokens() {
      return usage().prompt_tokens;
    },
    get completionTokens() {
      return usage().completion_tokens;
    },
    get finishReason() {
      return calls[0]!.stats.finishReason;
    },
    get cachedPromptTokens() {
      return usage().prompt_tokens_details?.cached_tokens;
    },
  };
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    for (const c of calls) c.close();
  };
  const fail = (err: unknown): never => {
    close();
    throw err;
  };
  // One next() in flight per live choice, settled into a value (a rejection must not go unhandled while another
  // choice is being read).
  const inFlight = new Map<number, Promise<Pulled>>();
  const pull = (i: number) =>
    inFlight.set(
      i,
      calls[i]!.next().then(
        (out): Pulled => ({ i, ok: true, out }),
        (err: unknown): Pulled => ({ i, ok: false, err }),
      ),
    );
  let ended = false;

  async function nextStreamed(): Promise<string | Uint8Array | null> {
    if (inFlight.size === 0 && !ended) for (let i = 0; i < calls.length; i++) pull(i);
    while (inFlight.size > 0) {
      const r = await Promise.race(inFlight.values());
      if (!r.ok) return fail(r.err);
      if (r.out === null) {
        inFlight.delete(r.i);
        continue;
      }
      pull(r.i);
      if (r.out.length > 0) return r.out;
    }
    if (ended) return null;
    ended = true;
    close();
    const enc = (o.endpoint === "chat" ? createChatChunkEncoder : createCompletionChunkEncoder)(o.ctx);
    return enc.usage(usage()) + DONE_FRAME;
  }

  async function nextBody(): Promise<string | null> {
    if (ended) return null;
    ended = true;
    const bodies = await Promise.all(
      calls.map(async (c) => {
        const parts: string[] = [];
        for (let p = await c.next(); p !== null; p = await c.next()) parts.push(text(p));
        return parts.join("");
      }),
    ).catch(fail);
    close();
    return mergeChoiceBodies(bodies, usage());
  }

  return {
    backendId: calls[0]!.backendId,
    stats,
    close,
    // Streaming: each choice's first output is in hand (the backend opened them all), so their first frames go
    // out at once, in index order.
    ready: o.stream
      ? () => {
          let out = "";
          try {
            for (const c of calls) out += c.ready?.() ?? "";
          } catch (err) {
            fail(err);
          }
          return out;
        }
      : undefined,
    next: o.stream ? nextStreamed : nextBody,
  };
}
