/**
 * Prometheus metrics for /metrics: load gauges read from the engine at scrape
 * time, plus the event metrics (step times, TTFT, ITL, outcomes) of
 * telemetry/engine-metrics.ts on the same registry.
 *
 * @example
 * const m = createMetrics(state);
 * new Response(await m.render(), { headers: { "content-type": m.contentType } });
 */
import { Gauge, Registry } from "prom-client";
import { registerEngineMetrics, type EngineMetrics } from "../telemetry/engine-metrics";
import type { LoadSnapshot } from "../engine/load-tracker";
import type { ServingState } from "./serving-state";

export interface Metrics {
  render(): Promise<string>;
  readonly contentType: string;
  /** Event metrics the engine loop and the Generate handler feed (telemetry/engine-metrics.ts). */
  readonly engine: EngineMetrics;
}

const GAUGES: [keyof LoadSnapshot, string, string][] = [
  ["running", "dispatch_ms_running_sequences", "Sequences in the running batch"],
  ["waiting", "dispatch_ms_waiting_sequences", "Sequences waiting for admission"],
  ["queuedPrefillTokens", "dispatch_ms_queued_prefill_tokens", "Prompt tokens still to prefill"],
  ["kvBlocksUsed", "dispatch_ms_kv_blocks_used", "KV blocks held by sequences"],
  ["kvBlocksTotal", "dispatch_ms_kv_blocks_total", "KV blocks in the cache"],
  ["kvBlocksCached", "dispatch_ms_kv_blocks_cached", "KV blocks held only by the prefix cache"],
  ["prefillTokensPerS", "dispatch_ms_prefill_tokens_per_second", "Measured prefill rate (EMA)"],
  ["decodeStepsPerS", "dispatch_ms_decode_steps_per_second", "Measured decode step rate (EMA)"],
  ["steps", "dispatch_ms_engine_steps", "Engine steps run since start"],
];

export function createMetrics(state: ServingState): Metrics {
  const registry = new Registry();
  new Gauge({
    name: "dispatch_ms_serving",
    help: "1 when the model server is serving",
    registers: [registry],
    collect() {
      this.set(state.status === "serving" ? 1 : 0);
    },
  });
  for (const [key, name, help] of GAUGES) {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const load = state.engine?.load();
        if (load) this.set(Number(load[key]));
      },
    });
  }
  return { render: () => registry.metrics(), contentType: registry.contentType, engine: registerEngineMetrics(registry) };
}
