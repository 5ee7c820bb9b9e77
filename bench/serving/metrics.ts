/**
 * Serving metrics from per-request timings, defined as `vllm bench serve` defines them:
 *   TTFT  first token time - send time
 *   ITL   every gap between consecutive streamed tokens (all requests pooled)
 *   TPOT  per request (last token - first token) / (output tokens - 1)
 * Token counts come from the server's usage when it reports one (a streamed chunk may carry
 * no token's text — bytes of an unfinished UTF-8 character wait for the next), else chunks.
 *   E2E   last token - send time
 *   output tokens/s = all output tokens / (last finish - first send)
 * Percentiles by nearest rank. Pure.
 *
 * @example
 *   const s = summarize(records, wallSeconds);
 *   s.ttftMs.p99; s.outputTokS;
 */
export interface RequestRecord {
  /** ms timestamps (performance.now()) */
  sentAt: number;
  /** Arrival time of each streamed token (a chunk carrying n tokens counts n at once). */
  tokenTimes: number[];
  promptTokens: number;
  /** Output tokens as the server counted them (usage); tokenTimes.length when absent. */
  outputTokens?: number;
  error?: string;
}

export interface Dist {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface Summary {
  completed: number;
  failed: number;
  durationS: number;
  inputTokens: number;
  outputTokens: number;
  requestsPerS: number;
  outputTokS: number;
  totalTokS: number;
  ttftMs: Dist;
  tpotMs: Dist;
  itlMs: Dist;
  e2eMs: Dist;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function dist(xs: number[]): Dist {
  const s = [...xs].sort((a, b) => a - b);
  const mean = s.length ? s.reduce((a, b) => a + b, 0) / s.length : Number.NaN;
  return { mean, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s.length ? s[s.length - 1]! : Number.NaN };
}

export function summarize(records: RequestRecord[], durationS: number): Summary {
  const ok = records.filter((r) => !r.error && r.tokenTimes.length > 0);
  const ttft = ok.map((r) => r.tokenTimes[0]! - r.sentAt);
  const e2e = ok.map((r) => r.tokenTimes.at(-1)! - r.sentAt);
  const count = (r: RequestRecord) => r.outputTokens ?? r.tokenTimes.length;
  const tpot = ok.filter((r) => count(r) > 1 && r.tokenTimes.length > 1).map((r) => (r.tokenTimes.at(-1)! - r.tokenTimes[0]!) / (count(r) - 1));
  const itl: number[] = [];
  for (const r of ok) for (let i = 1; i < r.tokenTimes.length; i++) itl.push(r.tokenTimes[i]! - r.tokenTimes[i - 1]!);
  const inputTokens = ok.reduce((n, r) => n + r.promptTokens, 0);
  const outputTokens = ok.reduce((n, r) => n + count(r), 0);
  return {
    completed: ok.length,
    failed: records.length - ok.length,
    durationS,
    inputTokens,
    outputTokens,
    requestsPerS: ok.length / durationS,
    outputTokS: outputTokens / durationS,
    totalTokS: (inputTokens + outputTokens) / durationS,
    ttftMs: dist(ttft),
    tpotMs: dist(tpot),
    itlMs: dist(itl),
    e2eMs: dist(e2e),
  };
}
