import { expect, test } from "bun:test";
import { trace } from "@opentelemetry/api";
import { startTracing } from "@dispatch/common/src/telemetry/start-tracing";

// Runs the real SDK from OTEL_* variables against a fake OTLP/HTTP collector on loopback.
test("spans reach an OTLP collector named by OTEL_EXPORTER_OTLP_ENDPOINT", async () => {
  const received: { path: string; body: Buffer }[] = [];
  const collector = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      received.push({ path: new URL(req.url).pathname, body: Buffer.from(await req.arrayBuffer()) });
      return new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
    },
  });
  const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${collector.port}`;
  try {
    const tracing = startTracing({ serviceName: "dispatch-gateway-test" });
    expect(tracing.enabled).toBe(true);
    const span = trace.getTracer("t").startSpan("otlp-export-probe");
    expect(span.isRecording()).toBe(true);
    span.end();
    await tracing.shutdown();
    const traces = received.filter((r) => r.path === "/v1/traces");
    expect(traces.length).toBeGreaterThan(0);
    expect(traces.some((r) => r.body.includes("otlp-export-probe") && r.body.includes("dispatch-gateway-test"))).toBe(true);
  } finally {
    if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved;
    trace.disable();
    collector.stop(true);
  }
});
