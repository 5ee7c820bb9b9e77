/**
 * Production metrics beyond the gateway's core set (gateway/src/metrics.ts),
 * registered on the same prom-client Registry so one /metrics serves both:
 * inter-token latency, per-backend load as the servers report it, routing
 * decisions and prefix-cache hit rate, auth failures, rate limiting and its
 * Redis fallback, discovery. Names and labels follow Prometheus conventions
 * (base units, `_total` counters, bounded label sets); docs/metrics.md lists
 * every one.
 *
 * @example
 * const t = registerProductionMetrics(metrics.registry, { backendLoads: () => router.loads() });
 * t.routed("cache-aware", "prefix", 512, 800);
 * t.interTokenLatency("chat", 0.021);
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** What a backend last reported about its load (WatchLoad / metrics scrape). */
export interface BackendLoadSample {
  backend: string;
  running: number;
  waiting: number;
  queuedPrefillTokens: number;
  kvBlocksUsed: number;
  kvBlocksTotal: number;
}

export interface ProductionMetricSources {
  /** Read at scrape time; omit when no load reports exist. */
  backendLoads?: () => Iterable<BackendLoadSample>;
  /** Backends known per discovery source (static, kubernetes), read at scrape time. */
  discoveredBackends?: () => Iterable<{ source: string; count: number }>;
}

export interface ProductionMetrics {
  interTokenLatency(endpoint: string, seconds: number): void;
  routed(policy: string, reason: string, matchedTokens: number, promptTokens: number): void;
  authFailure(reason: "missing_key" | "invalid_key"): void;
  rateLimited(limit: "requests" | "tokens"): void;
  rateLimitFallback(reason: "error" | "timeout"): void;
  discoveryError(source: string): void;
}

export function registerProductionMetrics(registry: Registry, sources: ProductionMetricSources = {}): ProductionMetrics {
  const registers = [registry];
  const itl = new Histogram({
    name: "dispatch_gateway_inter_token_latency_seconds",
    help: "Time between consecutive streamed output chunks",
    labelNames: ["endpoint"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const decisions = new Counter({
    name: "dispatch_gateway_routing_decisions_total",
    help: "Routing decisions by policy and reason (prefix, load, affinity, ...)",
    labelNames: ["policy", "reason"] as const,
    registers,
  });
  const promptTokens = new Counter({
    name: "dispatch_gateway_routing_prompt_tokens_total",
    help: "Prompt tokens of routed requests (denominator of the prefix-cache hit rate)",
    registers,
  });
  const matchedTokens = new Counter({
    name: "dispatch_gateway_routing_matched_tokens_total",
    help: "Prompt tokens the chosen backend was believed to cache already (numerator of the hit rate)",
    registers,
  });
  const authFailures = new Counter({
    name: "dispatch_gateway_auth_failures_total",
    help: "Requests refused with 401, by reason",
    labelNames: ["reason"] as const,
    registers,
  });
  const rateLimited = new Counter({
    name: "dispatch_gateway_rate_limited_total",
    help: "Requests refused with 429 by a per-key limit",
    labelNames: ["limit"] as const,
    registers,
  });
  const fallbacks = new Counter({
    name: "dispatch_gateway_rate_limit_fallbacks_total",
    help: "Rate-limit checks decided by local memory because Redis errored or missed its deadline",
    labelNames: ["reason"] as const,
    registers,
  });
  const discoveryErrors = new Counter({
    name: "dispatch_gateway_discovery_errors_total",
    help: "Failed discovery list/watch calls, by source",
    labelNames: ["source"] as const,
    registers,
  });
  if (sources.discoveredBackends) {
    const read = sources.discoveredBackends;
    new Gauge({
      name: "dispatch_gateway_discovered_backends",
      help: "Backends currently known, by discovery source",
      labelNames: ["source"] as const,
      registers,
      collect() {
        this.reset();
        for (const s of read()) this.set({ source: s.source }, s.count);
      },
    });
  }
  if (sources.backendLoads) {
    const read = sources.backendLoads;
    const gauge = (name: string, help: string, pick: (s: BackendLoadSample) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ["backend"] as const,
        registers,
        collect() {
          this.reset();
          for (const s of read()) {
            const v = pick(s);
            if (v !== undefined && Number.isFinite(v)) this.set({ backend: s.backend }, v);
          }
        },
      });
    gauge("dispatch_gateway_backend_running_requests", "Sequences decoding on the backend, as it last reported", (s) => s.running);
    gauge("dispatch_gateway_backend_waiting_requests", "Sequences queued on the backend, as it last reported", (s) => s.waiting);
    gauge("dispatch_gateway_backend_queued_prefill_tokens", "Prompt tokens waiting for prefill on the backend", (s) => s.queuedPrefillTokens);
    gauge("dispatch_gateway_backend_kv_cache_usage_ratio", "KV cache blocks in use / total on the backend (0..1)", (s) =>
      s.kvBlocksTotal > 0 ? s.kvBlocksUsed / s.kvBlocksTotal : undefined,
    );
  }
  const itlChildren = new Map<string, { observe(v: number): void }>();
  // Pre-bound label children: prom-client's labels() builds and hashes a label object per call.
  const decisionChildren = new Map<string, { inc(): void }>();
  return {
    interTokenLatency(endpoint, seconds) {
      let h = itlChildren.get(endpoint);
      if (!h) itlChildren.set(endpoint, (h = itl.labels(endpoint)));
      h.observe(seconds);
    },
    routed(policy, reason, matched, prompt) {
      const key = `${policy}\0${reason}`;
      let c = decisionChildren.get(key);
      if (!c) {
        if (decisionChildren.size >= 256) decisionChildren.clear(); // reasons are a small fixed set; bounded all the same
        decisionChildren.set(key, (c = decisions.labels(policy, reason)));
      }
      c.inc();
      if (prompt > 0) promptTokens.inc(prompt);
      if (matched > 0) matchedTokens.inc(Math.min(matched, prompt));
    },
    authFailure: (reason) => authFailures.labels(reason).inc(),
    rateLimited: (limit) => rateLimited.labels(limit).inc(),
    rateLimitFallback: (reason) => fallbacks.labels(reason).inc(),
    discoveryError: (source) => discoveryErrors.labels(source).inc(),
  };
}
