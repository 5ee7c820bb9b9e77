/**
 * The gateway's span for one OpenAI request, with GenAI semantic-convention
 * attribute names (gen_ai.*) and the routing story as events: which backend
 * the policy chose and why, how many prompt tokens it already caches, each
 * retry, the first token. Made by hand: auto-instrumentation does not see
 * Bun.serve. A parent in the request's own `traceparent` header is honoured.
 *
 * @example
 * const span = startRequestSpan({ operation: "chat", model: "qwen3", stream: true, headers: req.headers });
 * span.routed({ backend: "ms-0", reason: "prefix", policy: "cache-aware", matchedTokens: 512, promptTokens: 800 });
 * injectTraceHeaders(span.context, rpcHeaders);      // the model server's spans join this trace
 * span.firstToken();
 * span.end({ status: 200, inputTokens: 800, outputTokens: 64, finishReasons: ["stop"] });
 */
import { type Context, context as otelContext, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import { extractTraceContext } from "./propagation";

export const TRACER_NAME = "dispatch-gateway";

/** Attribute names (OpenTelemetry GenAI and HTTP semantic conventions, plus dispatch.*). */
export const ATTR = {
  operation: "gen_ai.operation.name",
  provider: "gen_ai.provider.name",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  maxTokens: "gen_ai.request.max_tokens",
  temperature: "gen_ai.request.temperature",
  topP: "gen_ai.request.top_p",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  finishReasons: "gen_ai.response.finish_reasons",
  responseId: "gen_ai.response.id",
  method: "http.request.method",
  route: "http.route",
  status: "http.response.status_code",
  errorType: "error.type",
  serverAddress: "server.address",
  stream: "dispatch.request.stream",
  backend: "dispatch.route.backend",
  reason: "dispatch.route.reason",
  policy: "dispatch.route.policy",
  matchedTokens: "dispatch.route.matched_tokens",
  promptTokens: "dispatch.route.prompt_tokens",
  attempt: "dispatch.retry.attempt",
  ttft: "dispatch.time_to_first_token_ms",
} as const;

export interface RequestSpanStart {
  /** gen_ai.operation.name: "chat" or "text_completion". */
  operation: "chat" | "text_completion";
  model: string;
  stream: boolean;
  route?: string;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  /** Incoming request headers: a `traceparent` there becomes the parent. */
  headers?: Headers;
  tracer?: Tracer;
  now?: () => number;
}

export interface RouteInfo {
  backend: string;
  reason: string;
  policy?: string;
  /** Prompt tokens the chosen backend already caches (blocks x block size). */
  matchedTokens?: number;
  promptTokens?: number;
  /** The backend's address, for server.address. */
  address?: string;
}

export interface RequestEnd {
  status: number;
  inputTokens?: number;
  outputTokens?: number;
  finishReasons?: string[];
  responseModel?: string;
  responseId?: string;
  /** An error class or code (error.type) when the request failed. */
  error?: string;
}

export interface RequestSpan {
  readonly span: Span;
  /** Context holding the span: pass to injectTraceHeaders for the model-server call. */
  readonly context: Context;
  routed(route: RouteInfo): void;
  retry(attempt: number, failedBackend: string, error: string): void;
  firstToken(): void;
  end(result: RequestEnd): void;
}

export function startRequestSpan(o: RequestSpanStart): RequestSpan {
  const tracer = o.tracer ?? trace.getTracer(TRACER_NAME);
  const now = o.now ?? performance.now.bind(performance);
  const t0 = now();
  const parent = o.headers ? extractTraceContext(o.headers, otelContext.active()) : otelContext.active();
  const attributes: Record<string, string | number | boolean> = {
    [ATTR.operation]: o.operation,
    [ATTR.provider]: "dispatch",
    [ATTR.requestModel]: o.model,
    [ATTR.stream]: o.stream,
    [ATTR.method]: "POST",
  };
  if (o.route) attributes[ATTR.route] = o.route;
  if (o.maxTokens !== undefined) attributes[ATTR.maxTokens] = o.maxTokens;
  if (o.temperature !== undefined) attributes[ATTR.temperature] = o.temperature;
  if (o.topP !== undefined) attributes[ATTR.topP] = o.topP;
  const span = tracer.startSpan(`${o.operation} ${o.model}`, { kind: SpanKind.SERVER, attributes }, parent);
  const ctx = trace.setSpan(parent, span);
  let ended = false;
  let sawFirst = false;
  return {
    span,
    context: ctx,
    routed(r) {
      const a: Record<string, string | number> = { [ATTR.backend]: r.backend, [ATTR.reason]: r.reason };
      if (r.policy) a[ATTR.policy] = r.policy;
      if (r.matchedTokens !== undefined) a[ATTR.matchedTokens] = r.matchedTokens;
      if (r.promptTokens !== undefined) a[ATTR.promptTokens] = r.promptTokens;
      span.addEvent("dispatch.route", a);
      span.setAttributes(a);
      if (r.address) span.setAttribute(ATTR.serverAddress, r.address);
    },
    retry(attempt, failedBackend, error) {
      span.addEvent("dispatch.retry", { [ATTR.attempt]: attempt, [ATTR.backend]: failedBackend, [ATTR.errorType]: error });
    },
    firstToken() {
      if (sawFirst) return;
      sawFirst = true;
      const ms = now() - t0;
      span.addEvent("dispatch.first_token", { [ATTR.ttft]: ms });
      span.setAttribute(ATTR.ttft, ms);
    },
    end(r) {
      if (ended) return;
      ended = true;
      span.setAttribute(ATTR.status, r.status);
      if (r.inputTokens !== undefined) span.setAttribute(ATTR.inputTokens, r.inputTokens);
      if (r.outputTokens !== undefined) span.setAttribute(ATTR.outputTokens, r.outputTokens);
      if (r.finishReasons?.length) span.setAttribute(ATTR.finishReasons, r.finishReasons);
      if (r.responseModel) span.setAttribute(ATTR.responseModel, r.responseModel);
      if (r.responseId) span.setAttribute(ATTR.responseId, r.responseId);
      if (r.error || r.status >= 500) {
        span.setAttribute(ATTR.errorType, r.error ?? String(r.status));
        span.setStatus({ code: SpanStatusCode.ERROR, message: r.error });
      }
      span.end();
    },
  };
}
