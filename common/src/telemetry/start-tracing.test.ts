import { expect, test } from "bun:test";
import { startTracing, tracingRequested } from "./start-tracing";

test("OTLP export from the standard environment: off by default; on with an endpoint; opt-outs win", () => {
  expect(tracingRequested({})).toBe(false);
  expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })).toBe(true);
  expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" })).toBe(true);
  expect(tracingRequested({ OTEL_TRACES_EXPORTER: "console" })).toBe(true);
  expect(tracingRequested({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })).toBe(false);
  expect(tracingRequested({ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" })).toBe(false);
  expect(startTracing({ serviceName: "x", env: {} }).enabled).toBe(false);
});
