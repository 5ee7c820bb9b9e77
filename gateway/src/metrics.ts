/**
 * Prometheus metrics (prom-client) on a registry of the gateway's own.
 * Label children are cached so the hot path does no label hashing.
 *
 * @example
 * const m = createMetrics(pool);
 * m.request("chat", 200, true).inc();
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { BackendPool } from "./workers/pool";

export interface Metrics {
  readonly registry: Registry;
  /** Request counter child for endpoint/status/stream. */
  request(endpoint: string, status: number, stream: boolean): { inc(): void };
  observeDuration(endpoint: string, seconds: number): void;
  observeTtft(endpoint: string, seconds: number): void;
  tokens(direction: "prompt" | "completion", n: number): void;
  retry(backendId: string): void;
}

export function createMetrics(pool: BackendPool): Metrics {
  const registry = new Registry();
  const requests = new Counter({
    name: "dispatch_gateway_requests_total",
    help: "Generation requests by endpoint, HTTP status and streaming",
    labelNames: ["endpoint", "status", "stream"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "dispatch_gateway_request_duration_seconds",
    help: "Time from request to the end of the response",
    labelNames: ["endpoint"] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const ttft = new Histogram({
    name: "dispatch_gateway_time_to_first_token_seconds",
    help: "Time from request to the first upstream output",
    labelNames: ["endpoint"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const tokens = new Counter({
    name: "dispatch_gateway_tokens_total",
    help: "Tokens by direction (prompt, completion)",
    labelNames: ["direction"] as const,
    registers: [registry],
  });
  const retries = new Counter({
    name: "dispatch_gateway_retries_total",
    help: "Attempts retried on another backend, by the backend that failed",
    labelNames: ["backend"] as const,
    registers: [registry],
  });
  new Gauge({
    name: "dispatch_gateway_backend_healthy",
    help: "1 when the backend takes work",
    labelNames: ["backend", "kind"] as const,
    registers: [registry],
    collect() {
      for (const m of pool.members) this.set({ backend: m.backend.id, kind: m.backend.kind }, m.healthy ? 1 : 0);
    },
  });
  new Gauge({
    name: "dispatch_gateway_backend_outstanding",
    help: "Requests in flight from this gateway to the backend",
    labelNames: ["backend"] as const,
    registers: [registry],
    collect() {
      for (const m of pool.members) this.set({ backend: m.backend.id }, m.outstanding);
    },
  });
  const children = new Map<string, { inc(): void }>();
  const durations = new Map<string, { observe(v: number): void }>();
  const ttfts = new Map<string, { observe(v: number): void }>();
  const promptTokens = tokens.labels("prompt");
  const completionTokens = tokens.labels("completion");
  return {
    registry,
    request(endpoint, status, stream) {
      const key = `${endpoint}|${status}|${stream}`;
      let c = children.get(key);
      if (!c) children.set(key, (c = requests.labels(endpoint, String(status), String(stream))));
      return c;
    },
    observeDuration(endpoint, s) {
      let h = durations.get(endpoint);
      if (!h) durations.set(endpoint, (h = duration.labels(endpoint)));
      h.observe(s);
    },
    observeTtft(endpoint, s) {
      let h = ttfts.get(endpoint);
      if (!h) ttfts.set(endpoint, (h = ttft.labels(endpoint)));
      h.observe(s);
    },
    tokens(direction, n) {
      if (n > 0) (direction === "prompt" ? promptTokens : completionTokens).inc(n);
    },
    retry: (backendId) => retries.labels(backendId).inc(),
  };
}
