import { afterAll, describe, expect, test } from "bun:test";
import { SpanKind, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Registry } from "prom-client";
import { registerProductionMetrics } from "./metrics";
import { extractTraceContext, injectTraceHeaders } from "./propagation";
import { ATTR, startRequestSpan } from "./request-span";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("test");
afterAll(() => provider.shutdown());

describe("request span", () => {
  test("GenAI attributes, routing/retry/first-token events, usage at the end", () => {
    exporter.reset();
    let t = 100;
    const s = startRequestSpan({ operation: "chat", model: "qwen3-moe", stream: true, maxTokens: 64, route: "/v1/chat/completions", tracer, now: () => t });
    s.routed({ backend: "ms-0", reason: "prefix", policy: "cache-aware", matchedTokens: 512, promptTokens: 800 });
    s.retry(2, "ms-0", "unavailable");
    s.routed({ backend: "ms-1", reason: "load", policy: "cache-aware", matchedTokens: 0, promptTokens: 800 });
    t = 142;
    s.firstToken();
    s.firstToken(); // only the first counts
    s.end({ status: 200, inputTokens: 800, outputTokens: 64, finishReasons: ["stop"] });
    s.end({ status: 500 }); // idempotent
    const [span] = exporter.getFinishedSpans();
    expect(exporter.getFinishedSpans().length).toBe(1);
    expect(span!.name).toBe("chat qwen3-moe");
    expect(span!.kind).toBe(SpanKind.SERVER);
    expect(span!.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "qwen3-moe",
      "gen_ai.request.max_tokens": 64,
      "gen_ai.usage.input_tokens": 800,
      "gen_ai.usage.output_tokens": 64,
      "gen_ai.response.finish_reasons": ["stop"],
      "http.response.status_code": 200,
      "dispatch.route.backend": "ms-1",
      [ATTR.ttft]: 42,
    });
    expect(span!.events.map((e) => e.name)).toEqual(["dispatch.route", "dispatch.retry", "dispatch.route", "dispatch.first_token"]);
    expect(span!.events[0]!.attributes).toMatchObject({ "dispatch.route.matched_tokens": 512, "dispatch.route.reason": "prefix" });
    expect(span!.status.code).toBe(0);
  });

  test("server errors mark the span; a client's traceparent becomes the parent", () => {
    exporter.reset();
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const headers = new Headers({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    const s = startRequestSpan({ operation: "text_completion", model: "m", stream: false, headers, tracer });
    s.end({ status: 503, error: "upstream_unavailable" });
    const [span] = exporter.getFinishedSpans();
    expect(span!.spanContext().traceId).toBe(traceId);
    expect(span!.parentSpanContext?.spanId).toBe("00f067aa0ba902b7");
    expect(span!.status.code).toBe(2);
    expect(span!.attributes["error.type"]).toBe("upstream_unavailable");
  });
});

describe("trace context across the Connect hop", () => {
  test("the model server's spans join the gateway's trace over a real HTTP request", async () => {
    exporter.reset();
    const seen: Record<string, string> = {};
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        // Model-server side: extract and start a child span.
        const parent = extractTraceContext(req.headers);
        const span = tracer.startSpan("generate", { kind: SpanKind.SERVER }, parent);
        seen.traceparent = req.headers.get("traceparent") ?? "";
        span.end();
        return new Response("ok");
      },
    });
    try {
      const s = startRequestSpan({ operation: "chat", model: "m", stream: true, tracer });
      const headers = new Headers({ "content-type": "application/connect+proto" });
      injectTraceHeaders(s.context, headers);
      await (await fetch(`http://127.0.0.1:${server.port}/dispatch.v1.ModelService/Generate`, { method: "POST", headers, body: "" })).text();
      s.end({ status: 200 });
      const spans = exporter.getFinishedSpans();
      const gw = spans.find((x) => x.name === "chat m")!;
      const ms = spans.find((x) => x.name === "generate")!;
      expect(seen.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(ms.spanContext().traceId).toBe(gw.spanContext().traceId);
      expect(ms.parentSpanContext?.spanId).toBe(gw.spanContext().spanId);
    } finally {
      server.stop(true);
    }
  });

  test("with tracing off, an incoming trace context still passes through", () => {
    const off = trace.getTracer("noop-check"); // global provider not registered in this test file: no-op
    const headers = new Headers({ traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
    const s = startRequestSpan({ operation: "chat", model: "m", stream: false, headers, tracer: off });
    const out: Record<string, string> = {};
    injectTraceHeaders(s.context, out);
    expect(out.traceparent).toContain("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(s.span.isRecording()).toBe(false);
    s.end({ status: 200 });
    expect(trace.getSpanContext(extractTraceContext({}))).toBeUndefined();
    expect(trace.getSpanContext(extractTraceContext({ TraceParent: "garbage" }))).toBeUndefined();
  });
});

describe("production metrics", () => {
  test("names, labels and scrape-time gauges", async () => {
    const registry = new Registry();
    const m = registerProductionMetrics(registry, {
      backendLoads: () => [{ backend: "ms-0", running: 3, waiting: 1, queuedPrefillTokens: 900, kvBlocksUsed: 30, kvBlocksTotal: 120 }],
      discoveredBackends: () => [{ source: "kubernetes", count: 2 }],
    });
    m.routed("cache-aware", "prefix", 512, 800);
    m.routed("cache-aware", "load", 0, 200);
    m.interTokenLatency("chat", 0.02);
    m.rateLimited("tokens");
    m.rateLimitFallback("timeout");
    m.authFailure("invalid_key");
    const text = await registry.metrics();
    expect(text).toContain('dispatch_gateway_routing_decisions_total{policy="cache-aware",reason="prefix"} 1');
    expect(text).toContain("dispatch_gateway_routing_prompt_tokens_total 1000");
    expect(text).toContain("dispatch_gateway_routing_matched_tokens_total 512");
    expect(text).toContain('dispatch_gateway_backend_kv_cache_usage_ratio{backend="ms-0"} 0.25');
    expect(text).toContain('dispatch_gateway_backend_queued_prefill_tokens{backend="ms-0"} 900');
    expect(text).toContain('dispatch_gateway_inter_token_latency_seconds_bucket{le="0.02",endpoint="chat"} 1');
    expect(text).toContain('dispatch_gateway_rate_limited_total{limit="tokens"} 1');
    expect(text).toContain('dispatch_gateway_discovered_backends{source="kubernetes"} 2');
    for (const line of text.split("\n").filter((l) => l.startsWith("# TYPE"))) {
      expect(line).toMatch(/^# TYPE dispatch_gateway_[a-z_]+ (counter|gauge|histogram)$/);
    }
  });
});

describe("request telemetry (span + metrics for the generate handler)", () => {
  test("routing, cache match, inter-token latency and trace headers", async () => {
    const { createRequestTelemetryFactory } = await import("./request-telemetry");
    exporter.reset();
    const registry = new Registry();
    const metrics = registerProductionMetrics(registry);
    let t = 0;
    const f = createRequestTelemetryFactory({ metrics, policy: "cache-aware", tracer, now: () => t });
    const r = f.start({ endpoint: "chat", operation: "chat", model: "m", stream: true });
    expect(r.traceHeaders.traceparent).toContain(r.span.span.spanContext().spanId);
    r.routed({ backendId: "ms-0", reason: "prefix", matchedBlocks: 3 }, { promptTokens: 100, blockSize: 16 });
    t = 50;
    r.chunk();
    t = 70;
    r.chunk();
    r.end({ status: 200 });
    const text = await registry.metrics();
    expect(text).toContain("dispatch_gateway_routing_matched_tokens_total 48");
    expect(text).toContain("dispatch_gateway_routing_prompt_tokens_total 100");
    expect(text).toContain('dispatch_gateway_inter_token_latency_seconds_bucket{le="0.02",endpoint="chat"} 1');
    const [span] = exporter.getFinishedSpans();
    expect(span!.attributes["dispatch.route.matched_tokens"]).toBe(48);
    expect(span!.attributes["dispatch.time_to_first_token_ms"]).toBe(50);
  });
});
