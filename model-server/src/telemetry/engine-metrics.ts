/**
 * Model-server metrics beyond the scrape-time load gauges of rpc/metrics.ts
 * (KV blocks used/total, running, waiting/queue depth): what only the engine
 * loop and the Generate handler see as it happens. Register on the same
 * Registry so one /metrics serves both. Names `dispatch_ms_*`, base units,
 * documented in docs/metrics.md.
 *
 * @example
 * const em = registerEngineMetrics(registry);
 * em.step({ seconds: 0.031, sequences: 12, tokens: 268, prefillTokens: 256, preempted: 0 });
 * em.request("ok"); em.firstToken(0.12); em.interToken(0.03);
 */
import { Counter, Histogram, type Registry } from "prom-client";

export type RequestOutcome = "ok" | "cancelled" | "invalid_argument" | "resource_exhausted" | "unavailable" | "deadline_exceeded" | "internal";

export interface EngineMetrics {
  /** One engine step: its wall time, sequences in the batch, tokens computed, of which prefill; launched ahead (engine/lookahead.ts). */
  step(s: { seconds: number; sequences: number; tokens: number; prefillTokens: number; preempted?: number; lookahead?: boolean }): void;
  /** Time a sequence waited for admission. */
  queueWait(seconds: number): void;
  firstToken(seconds: number): void;
  interToken(seconds: number): void;
  /** Prompt tokens of an admitted sequence and how many came from the prefix cache. */
  prompt(tokens: number, cachedTokens: number): void;
  generated(tokens: number): void;
  request(outcome: RequestOutcome): void;
  /** JSON mode: one vocabulary mask computed (not cached), in seconds on the engine's thread. */
  jsonMask(seconds: number): void;
}

export function registerEngineMetrics(registry: Registry): EngineMetrics {
  const registers = [registry];
  const latency = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
  const stepSeconds = new Histogram({ name: "dispatch_ms_step_duration_seconds", help: "Wall time of one engine step (forward pass + sampling)", buckets: latency, registers });
  const batchSeqs = new Histogram({
    name: "dispatch_ms_batch_size_sequences",
    help: "Sequences in the batch per engine step",
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers,
  });
  const batchTokens = new Histogram({
    name: "dispatch_ms_batch_size_tokens",
    help: "Tokens computed per engine step (prefill chunk + one per decoding sequence)",
    buckets: [1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
    registers,
  });
  const lookahead = new Counter({
    name: "dispatch_ms_lookahead_steps_total",
    help: "Decode steps launched before the previous step returned, their tokens chained on the device (share = this / dispatch_ms_step_duration_seconds_count)",
    registers,
  });
  const preemptions = new Counter({
    name: "dispatch_ms_preemptions_total",
    help: "Running sequences preempted for KV room (their blocks freed, their tokens recomputed when readmitted)",
    registers,
  });
  const queueWait = new Histogram({ name: "dispatch_ms_queue_wait_seconds", help: "Time from arrival to admission into the running batch", buckets: latency, registers });
  const ttft = new Histogram({ name: "dispatch_ms_time_to_first_token_seconds", help: "Time from arrival to the first generated token", buckets: latency, registers });
  const itl = new Histogram({ name: "dispatch_ms_inter_token_latency_seconds", help: "Time between consecutive generated tokens of a sequence", buckets: latency, registers });
  const promptTokens = new Counter({ name: "dispatch_ms_prompt_tokens_total", help: "Prompt tokens of admitted sequences", registers });
  const cachedTokens = new Counter({ name: "dispatch_ms_prompt_cached_tokens_total", help: "Prompt tokens served from the prefix cache (hit rate = this / prompt_tokens_total)", registers });
  const generated = new Counter({ name: "dispatch_ms_generation_tokens_total", help: "Tokens generated", registers });
  const requests = new Counter({ name: "dispatch_ms_requests_total", help: "Generate calls by outcome", labelNames: ["outcome"] as const, registers });
  const jsonMask = new Histogram({
    name: "dispatch_ms_json_mask_seconds",
    help: "JSON mode: time to compute one vocabulary mask not in the cache, on the engine's thread (every step waits for it)",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    registers,
  });
  return {
    step(s) {
      stepSeconds.observe(s.seconds);
      batchSeqs.observe(s.sequences);
      batchTokens.observe(s.tokens);
      if (s.lookahead) lookahead.inc();
      if (s.preempted) preemptions.inc(s.preempted);
    },
    queueWait: (s) => queueWait.observe(s),
    firstToken: (s) => ttft.observe(s),
    interToken: (s) => itl.observe(s),
    prompt(tokens, cached) {
      promptTokens.inc(tokens);
      if (cached > 0) cachedTokens.inc(Math.min(cached, tokens));
    },
    generated: (n) => n > 0 && generated.inc(n),
    request: (outcome) => requests.labels(outcome).inc(),
    jsonMask: (s) => jsonMask.observe(s),
  };
}
