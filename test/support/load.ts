/**
 * Closed-loop load: `concurrency` workers each sending chat requests one after
 * another until `durationMs` passes or `maxRequests` were sent (both bound
 * the run). Returns every outcome in order of completion.
 *
 * @example
 * const outcomes = await runLoad({ baseUrl: gw.url, concurrency: 8, durationMs: 3000, maxRequests: 500, body: () => req });
 */
import { type ChatOptions, type ChatOutcome, chat } from "./sse-client";

export interface LoadOptions {
  baseUrl: string;
  concurrency: number;
  durationMs: number;
  maxRequests: number;
  /** The request body for the n-th request (0-based). */
  body: (n: number) => Record<string, unknown>;
  chatOptions?: ChatOptions;
  /** Stops the run early when it returns true (checked before each request). */
  stopWhen?: () => boolean;
}

export interface Tally {
  total: number;
  byKind: Record<string, number>;
  byStatus: Record<string, number>;
}

export async function runLoad(o: LoadOptions): Promise<ChatOutcome[]> {
  const outcomes: ChatOutcome[] = [];
  const until = Date.now() + o.durationMs;
  let next = 0;
  const worker = async () => {
    while (Date.now() < until && next < o.maxRequests && !o.stopWhen?.()) {
      const n = next++;
      outcomes.push(await chat(o.baseUrl, o.body(n), o.chatOptions));
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  return outcomes;
}

export function tally(outcomes: ChatOutcome[]): Tally {
  const t: Tally = { total: outcomes.length, byKind: {}, byStatus: {} };
  for (const o of outcomes) {
    t.byKind[o.kind] = (t.byKind[o.kind] ?? 0) + 1;
    t.byStatus[o.status] = (t.byStatus[o.status] ?? 0) + 1;
  }
  return t;
}

/** A small chat request; `n` varies the prompt so prefixes differ. */
export function chatBody(model: string, n: number, maxTokens = 16, stream = true): Record<string, unknown> {
  return { model, messages: [{ role: "user", content: `request ${n}: tell me about word ${n % 97}` }], max_tokens: maxTokens, stream, temperature: 0 };
}
