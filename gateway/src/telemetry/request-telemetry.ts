/**
 * Everything the generate handler reports about one request, behind one
 * object: the request span (request-span.ts), the trace headers for the
 * model-server call, and the production metrics that belong to the request
 * (routing decision and cache match, inter-token latency). The handler calls
 * `routed()` per routing decision, `retry()` per retry, `chunk()` per streamed
 * chunk and `end()` once.
 *
 * @example
 * const telemetry = createRequestTelemetryFactory({ metrics: production, policy: router.policy.name });
 * const t = telemetry.start({ endpoint: "chat", operation: "chat", model: req.model, stream: req.stream, headers: c.req.raw.headers });
 * job.traceHeaders = t.traceHeaders;
 * t.routed(pick.decision, routeReq);
 * t.chunk(); ...
 * t.end({ status: 200, inputTokens, outputTokens, finishReasons: [reason] });
 */
import type { Tracer } from "@opentelemetry/api";
import type { RouteDecision, RouteRequest } from "../routing/policy";
import type { ProductionMetrics } from "./metrics";
import { injectTraceHeaders } from "./propagation";
import { type RequestEnd, type RequestSpan, type RequestSpanStart, startRequestSpan } from "./request-span";

export interface RequestTelemetry {
  readonly span: RequestSpan;
  /** `traceparent` (and `tracestate`) for the upstream call. */
  readonly traceHeaders: Record<string, string>;
  routed(decision: RouteDecision, req: Pick<RouteRequest, "promptTokens" | "blockSize">): void;
  retry(attempt: number, failedBackend: string, error: string): void;
  /** One streamed chunk reached the client. */
  chunk(): void;
  end(result: RequestEnd): void;
}

export interface RequestTelemetryFactory {
  start(o: RequestSpanStart & { endpoint: string }): RequestTelemetry;
}

export function createRequestTelemetryFactory(deps: { metrics?: ProductionMetrics; policy: string; tracer?: Tracer; now?: () => number }): RequestTelemetryFactory {
  const now = deps.now ?? performance.now.bind(performance);
  return {
    start(o) {
      // No copy of the options per request unless there is a tracer or clock to add.
      const span = startRequestSpan(deps.tracer || deps.now ? { tracer: deps.tracer, now: deps.now, ...o } : o);
      const traceHeaders: Record<string, string> = {};
      injectTraceHeaders(span.context, traceHeaders);
      let last: number | undefined;
      return {
        span,
        traceHeaders,
        routed(d, req) {
          const matchedTokens = d.matchedBlocks !== undefined && req.blockSize > 0 ? Math.min(d.matchedBlocks * req.blockSize, req.promptTokens) : undefined;
          span.routed({ backend: d.backendId, reason: d.reason, policy: deps.policy, matchedTokens, promptTokens: req.promptTokens });
          deps.metrics?.routed(deps.policy, d.reason, matchedTokens ?? 0, req.promptTokens);
        },
        retry: (attempt, backend, error) => span.retry(attempt, backend, error),
        chunk() {
          const t = now();
          if (last === undefined) span.firstToken();
          else deps.metrics?.interTokenLatency(o.endpoint, (t - last) / 1000);
          last = t;
        },
        end: (r) => span.end(r),
      };
    },
  };
}
