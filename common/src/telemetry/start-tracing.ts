/**
 * Turns OpenTelemetry tracing on from the standard OTEL_* environment, or
 * leaves it off (the default). On when OTEL_TRACES_EXPORTER names an exporter
 * (otlp, console) or an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT /
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); off when OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none. Everything else — protocol, headers, sampler,
 * resource attributes, batch sizes — is read by the SDK from the same
 * standard variables. Off, the API hands out no-op spans that still carry an
 * incoming trace context onward (gateway to model servers).
 *
 * Shared by the gateway and the model server; each passes its own service
 * name. Auto-instrumentation is not used: it does not see Bun.serve or fetch,
 * so spans are made by hand (gateway/src/telemetry/request-span.ts,
 * model-server/src/telemetry/sequence-trace.ts).
 *
 * @example
 * const tracing = startTracing({ serviceName: "dispatch-gateway" }); // or "dispatch-model-server"
 * process.on("SIGTERM", () => tracing.shutdown());
 */
import { NodeSDK } from "@opentelemetry/sdk-node";
import type { SpanProcessor } from "@opentelemetry/sdk-trace-base";

export interface Tracing {
  readonly enabled: boolean;
  /** Flushes pending spans; call before exit. */
  shutdown(): Promise<void>;
}

/** Whether the environment asks for traces. */
export function tracingRequested(env: Record<string, string | undefined>): boolean {
  if ((env.OTEL_SDK_DISABLED ?? "").toLowerCase() === "true") return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  if (exporters.includes("none")) return false;
  if (exporters.length) return true;
  return !!(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** Starts the OTel SDK when the environment asks for traces (or span processors are given). */
export function startTracing(opts: {
  serviceName: string;
  env?: Record<string, string | undefined>;
  /** Extra processors (tests pass an in-memory exporter's). */
  spanProcessors?: SpanProcessor[];
}): Tracing {
  const env = opts.env ?? process.env;
  if (!tracingRequested(env) && !opts.spanProcessors?.length) return { enabled: false, shutdown: async () => {} };
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME || opts.serviceName,
    instrumentations: [],
    // Metrics go through prom-client (/metrics) and logs to stdout: keep the SDK to traces only.
    metricReaders: [],
    logRecordProcessors: [],
    // Given processors replace the env-configured exporter; otherwise the SDK builds it from OTEL_*.
    ...(opts.spanProcessors?.length ? { spanProcessors: opts.spanProcessors } : {}),
  });
  sdk.start();
  return { enabled: true, shutdown: () => sdk.shutdown() };
}
