import { afterAll, describe, expect, test } from "bun:test";
import { SpanKind } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Registry } from "prom-client";
import { registerEngineMetrics } from "./engine-metrics";
import { startSequenceTrace } from "./sequence-trace";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("test");
afterAll(() => provider.shutdown());
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const GW_SPAN = "00f067aa0ba902b7";

describe("sequence spans", () => {
  test("queue -> prefill -> decode under a generate span that joins the gateway's trace", () => {
    exporter.reset();
    const headers = new Headers({ traceparent: `00-${TRACE}-${GW_SPAN}-01` });
    const t = startSequenceTrace({ headers, model: "tiny", requestId: "r1", promptTokens: 40, tracer });
    t.admitted({ cachedTokens: 32, batchSize: 3 });
    t.firstToken();
    t.firstToken();
    t.finished({ outputTokens: 8, finishReason: "stop" });
    t.failed("late"); // ignored after finish
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(["queue", "prefill", "decode", "generate tiny"]);
    const root = spans[3]!;
    expect(root.kind).toBe(SpanKind.SERVER);
    expect(root.spanContext().traceId).toBe(TRACE);
    expect(root.parentSpanContext?.spanId).toBe(GW_SPAN);
    for (const s of spans.slice(0, 3)) expect(s.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
    expect(root.attributes).toMatchObject({ "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 8, "dispatch.prefill.cached_tokens": 32 });
    expect(spans[1]!.attributes["dispatch.batch.size"]).toBe(3);
  });

  test("a sequence cancelled while queued ends with an error and no prefill span", () => {
    exporter.reset();
    const t = startSequenceTrace({ headers: new Headers(), model: "tiny", promptTokens: 5, tracer });
    t.failed("cancelled");
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(["queue", "generate tiny"]);
    expect(spans[1]!.status.code).toBe(2);
    expect(spans[1]!.attributes["dispatch.failed_in"]).toBe("queue");
  });
});

describe("engine metrics", () => {
  test("batch size, queue, latency and token series", async () => {
    const registry = new Registry();
    const m = registerEngineMetrics(registry);
    m.step({ seconds: 0.03, sequences: 12, tokens: 268, prefillTokens: 256 });
    m.step({ seconds: 0.003, sequences: 4, tokens: 4, prefillTokens: 0, preempted: 2, lookahead: true });
    m.prompt(100, 64);
    m.generated(10);
    m.request("ok");
    m.request("cancelled");
    m.firstToken(0.2);
    m.jsonMask(0.003);
    const text = await registry.metrics();
    expect(text).toContain('dispatch_ms_batch_size_sequences_bucket{le="16"} 2');
    expect(text).toContain('dispatch_ms_batch_size_sequences_bucket{le="8"} 1');
    expect(text).toContain('dispatch_ms_batch_size_sequences_bucket{le="2"} 0');
    expect(text).toContain("dispatch_ms_lookahead_steps_total 1");
    expect(text).toContain("dispatch_ms_preemptions_total 2");
    expect(text).toContain('dispatch_ms_json_mask_seconds_bucket{le="0.005"} 1');
    expect(text).toContain("dispatch_ms_prompt_cached_tokens_total 64");
    expect(text).toContain('dispatch_ms_requests_total{outcome="cancelled"} 1');
    expect(text).toContain("dispatch_ms_time_to_first_token_seconds_count 1");
  });
});

describe("sequence telemetry (engine observer)", () => {
  test("drives spans and metrics from the engine's hooks", async () => {
    const { createSequenceTelemetry } = await import("./sequence-telemetry");
    exporter.reset();
    const registry = new Registry();
    const metrics = registerEngineMetrics(registry);
    let t = 0;
    const obs = createSequenceTelemetry({ headers: new Headers({ traceparent: `00-${TRACE}-${GW_SPAN}-01` }), model: "tiny", promptTokens: 20, metrics, tracer, now: () => t });
    obs.admitted({ cachedTokens: 16, batchSize: 2, queueMs: 5 });
    t = 100;
    obs.tokens(1);
    t = 130;
    obs.tokens(3); // 30 ms over 3 tokens
    obs.finished({ outputTokens: 4, reason: "length" });
    const text = await registry.metrics();
    expect(text).toContain('dispatch_ms_time_to_first_token_seconds_bucket{le="0.1"} 1');
    expect(text).toContain('dispatch_ms_inter_token_latency_seconds_bucket{le="0.01"} 3');
    expect(text).toContain("dispatch_ms_generation_tokens_total 4");
    expect(text).toContain("dispatch_ms_prompt_cached_tokens_total 16");
    expect(text).toContain('dispatch_ms_requests_total{outcome="ok"} 1');
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(["queue", "prefill", "decode", "generate tiny"]);
  });

  test("a deadline ends as an error span and a deadline_exceeded outcome", async () => {
    const { createSequenceTelemetry } = await import("./sequence-telemetry");
    exporter.reset();
    const registry = new Registry();
    const obs = createSequenceTelemetry({ headers: new Headers(), model: "tiny", promptTokens: 3, metrics: registerEngineMetrics(registry), tracer });
    obs.finished({ outputTokens: 0, reason: "deadline" });
    expect(await registry.metrics()).toContain('dispatch_ms_requests_total{outcome="deadline_exceeded"} 1');
    expect(exporter.getFinishedSpans().at(-1)!.status.code).toBe(2);
  });
});
