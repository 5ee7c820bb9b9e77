/**
 * One streamed `POST /v1/completions` with token-id prompts (EOS ignored, exact output
 * length), timing every streamed chunk. Parses SSE as bytes -> lines -> events; a chunk that
 * carries text is timed (ITL is per chunk, as `vllm bench serve` measures it); the token count
 * is the final usage chunk's completion_tokens.
 *
 * @example
 *   const r = await streamCompletion({ baseUrl, model: "m", prompt: [1, 2, 3], outputLen: 16 });
 *   r.tokenTimes.length;   // 16
 */
import type { RequestRecord } from "./metrics";
import { sseData } from "./sse-data";

export interface CompletionCall {
  baseUrl: string;
  model: string;
  prompt: number[];
  outputLen: number;
  apiKey?: string;
  signal?: AbortSignal;
  /** More request fields (e.g. `{ logprobs: 5, frequency_penalty: 0.5 }`), merged into the body. */
  extra?: Record<string, unknown>;
}

export type CompletionRecord = RequestRecord;

export async function streamCompletion(c: CompletionCall): Promise<CompletionRecord> {
  const rec: CompletionRecord = { sentAt: performance.now(), tokenTimes: [], promptTokens: c.prompt.length };
  try {
    const res = await fetch(`${c.baseUrl}/v1/completions`, {
      method: "POST",
      signal: c.signal,
      headers: { "content-type": "application/json", ...(c.apiKey ? { authorization: `Bearer ${c.apiKey}` } : {}) },
      body: JSON.stringify({
        model: c.model,
        prompt: c.prompt,
        max_tokens: c.outputLen,
        min_tokens: c.outputLen,
        ignore_eos: true,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
        ...c.extra,
      }),
    });
    if (!res.ok || !res.body) {
      rec.error = `HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`;
      return rec;
    }
    for await (const { data, at } of sseData(res.body)) {
      const ev = JSON.parse(data) as { choices?: { text?: string }[]; usage?: { completion_tokens?: number } | null; error?: { message?: string } };
      if (ev.error) rec.error = ev.error.message ?? "stream error";
      if (ev.choices?.some((c) => c.text)) rec.tokenTimes.push(at);
      if (ev.usage?.completion_tokens !== undefined) rec.outputTokens = ev.usage.completion_tokens;
    }
  } catch (e) {
    rec.error = e instanceof Error ? e.message : String(e);
  }
  return rec;
}
