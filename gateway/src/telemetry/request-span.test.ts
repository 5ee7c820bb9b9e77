import { expect, test } from "bun:test";
import { ProxyTracerProvider, trace } from "@opentelemetry/api";
import { createRequestTelemetryFactory } from "./request-telemetry";
import { TRACER_NAME } from "./request-span";

const start = (headers: Headers) =>
  createRequestTelemetryFactory({ policy: "p" }).start({ endpoint: "completions", operation: "text_completion", model: "m", stream: true, headers });

test("an incoming traceparent still reaches the model server with tracing off", () => {
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const t = start(new Headers({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` }));
  expect(t.traceHeaders.traceparent).toContain(traceId);
  t.end({ status: 200 });
});

test("without one, and with no tracer registered, nothing is sent and nothing records", () => {
  const p = trace.getTracerProvider();
  if (!(p instanceof ProxyTracerProvider) || p.getDelegateTracer(TRACER_NAME) !== undefined) return; // another test registered tracing
  const t = start(new Headers({ "content-type": "application/json" }));
  expect(t.traceHeaders).toEqual({});
  expect(t.span.span.isRecording()).toBe(false);
  t.routed({ backendId: "b", reason: "only" }, { promptTokens: 3, blockSize: 16 });
  t.chunk();
  t.end({ status: 200 });
});
