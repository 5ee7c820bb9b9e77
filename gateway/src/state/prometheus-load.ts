/**
 * Load of foreign backends (vLLM, SGLang) from their Prometheus /metrics
 * text: the request-queue and KV-usage gauges, turned into the router's
 * LoadSnapshot. Pure parsing; the scraper (metrics-scraper.ts) does the I/O.
 *
 * Gauges read (summed over label sets, e.g. several model names):
 * - vLLM: `vllm:num_requests_running`, `vllm:num_requests_waiting`,
 *   `vllm:kv_cache_usage_perc` (older releases: `vllm:gpu_cache_usage_perc`), a 0-1 fraction.
 * - SGLang: `sglang:num_running_reqs`, `sglang:num_queue_reqs`,
 *   `sglang:token_usage` (0-1 fraction of KV tokens in use).
 * KV usage is expressed as blocks per mille (`kvBlocksTotal` 1000) because a
 * foreign backend does not tell us its block count; queued prefill tokens are
 * unknown (0): the router's own pending-work accounting fills that in.
 *
 * @example
 * loadFromMetrics(await (await fetch(url)).text()); // { running: 3, waiting: 1, ... } or undefined
 */
import type { LoadSnapshot } from "../routing/load-tracker";

/** name -> sum of sample values over label sets. Comments, histograms' buckets and NaN are skipped. */
export function parsePrometheusText(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const l = line.trim();
    if (l.length === 0 || l.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\d+)?$/.exec(l);
    if (!m) continue;
    const value = Number(m[3]);
    if (!Number.isFinite(value)) continue;
    out.set(m[1]!, (out.get(m[1]!) ?? 0) + value);
  }
  return out;
}

const KV_SCALE = 1000;

/** The load snapshot a vLLM or SGLang metrics page describes, or undefined when it has neither's gauges. */
export function loadFromMetrics(text: string): LoadSnapshot | undefined {
  const g = parsePrometheusText(text);
  const pick = (...names: string[]) => {
    for (const n of names) if (g.has(n)) return g.get(n)!;
    return undefined;
  };
  const running = pick("vllm:num_requests_running", "sglang:num_running_reqs");
  const waiting = pick("vllm:num_requests_waiting", "sglang:num_queue_reqs");
  if (running === undefined && waiting === undefined) return undefined;
  const usage = pick("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage") ?? 0;
  return {
    running: Math.max(0, Math.round(running ?? 0)),
    waiting: Math.max(0, Math.round(waiting ?? 0)),
    queuedPrefillTokens: 0,
    kvBlocksUsed: Math.round(Math.min(1, Math.max(0, usage)) * KV_SCALE),
    kvBlocksTotal: KV_SCALE,
  };
}
