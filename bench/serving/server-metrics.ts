/**
 * The model server's prompt-token counters from its /metrics (Prometheus text): prompt tokens
 * admitted and those served from the prefix cache. Read before and after a run, their difference
 * says whether that run's prompts hit an earlier run's cached prefix.
 *
 * @example
 *   const before = await promptCounters("http://127.0.0.1:50051");
 *   // ... a run ...
 *   const hit = (await promptCounters(url)).cachedTokens - before.cachedTokens;
 */
export interface PromptCounters {
  promptTokens: number;
  cachedTokens: number;
}

/** One counter's value from Prometheus text (0 when the line is absent: never incremented). */
export function counterValue(text: string, name: string): number {
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, "m"));
  return m ? Number(m[1]) : 0;
}

export async function promptCounters(modelServerUrl: string): Promise<PromptCounters> {
  const res = await fetch(`${modelServerUrl}/metrics`, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${modelServerUrl}/metrics: HTTP ${res.status}`);
  const text = await res.text();
  return { promptTokens: counterValue(text, "dispatch_ms_prompt_tokens_total"), cachedTokens: counterValue(text, "dispatch_ms_prompt_cached_tokens_total") };
}
