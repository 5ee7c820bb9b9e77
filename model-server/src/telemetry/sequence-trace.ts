/**
 * Spans for one sequence inside the model server, children of the gateway's
 * request span through the `traceparent` header of the Generate call:
 *
 *   generate <model>        SERVER  the whole call
 *     ├─ queue              waiting for admission to the running batch
 *     ├─ prefill            admitted -> first token (cached prompt tokens as an attribute)
 *     └─ decode             first token -> finish
 *
 * The engine calls the phase methods from its scheduler loop; each closes the
 * previous phase, so a sequence that is cancelled mid-queue still ends with
 * correct spans. Attribute names follow the GenAI semantic conventions.
 *
 * @example
 * const t = startSequenceTrace({ headers: ctx.requestHeader, model: "qwen3", requestId, promptTokens: 812 });
 * t.admitted({ cachedTokens: 512 });   // from the scheduler, when the sequence joins the batch
 * t.firstToken();
 * t.finished({ outputTokens: 64, finishReason: "stop" });   // or t.failed("cancelled")
 */
import { type Context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

const propagator = new W3CTraceContextPropagator();

export interface SequenceTraceStart {
  /** The Generate call's request headers (Connect `ctx.requestHeader`). */
  headers: Headers;
  model: string;
  requestId?: string;
  promptTokens: number;
  maxTokens?: number;
  tracer?: Tracer;
}

export interface SequenceTrace {
  readonly span: Span;
  admitted(o?: { cachedTokens?: number; batchSize?: number }): void;
  firstToken(): void;
  finished(o: { outputTokens: number; finishReason: string }): void;
  failed(error: string): void;
}

export function startSequenceTrace(o: SequenceTraceStart): SequenceTrace {
  const tracer = o.tracer ?? trace.getTracer("dispatch-model-server");
  const parent: Context = propagator.extract(ROOT_CONTEXT, o.headers, {
    get: (h, k) => h.get(k) ?? undefined,
    keys: (h) => [...h.keys()],
  });
  const attributes: Record<string, string | number> = {
    "gen_ai.operation.name": "generate",
    "gen_ai.request.model": o.model,
    "gen_ai.usage.input_tokens": o.promptTokens,
  };
  if (o.requestId) attributes["dispatch.request.id"] = o.requestId;
  if (o.maxTokens !== undefined) attributes["gen_ai.request.max_tokens"] = o.maxTokens;
  const root = tracer.startSpan(`generate ${o.model}`, { kind: SpanKind.SERVER, attributes }, parent);
  const ctx = trace.setSpan(parent, root);
  let phase: Span | undefined = tracer.startSpan("queue", {}, ctx);
  let state: "queue" | "prefill" | "decode" | "done" = "queue";

  const next = (name: "prefill" | "decode", attrs: Record<string, number> = {}) => {
    phase?.end();
    phase = tracer.startSpan(name, { attributes: attrs }, ctx);
    state = name;
  };
  const close = () => {
    phase?.end();
    phase = undefined;
    state = "done";
  };
  return {
    span: root,
    admitted(a = {}) {
      if (state !== "queue") return;
      const attrs: Record<string, number> = {};
      if (a.cachedTokens !== undefined) attrs["dispatch.prefill.cached_tokens"] = a.cachedTokens;
      if (a.batchSize !== undefined) attrs["dispatch.batch.size"] = a.batchSize;
      next("prefill", attrs);
      if (a.cachedTokens !== undefined) root.setAttribute("dispatch.prefill.cached_tokens", a.cachedTokens);
    },
    firstToken() {
      if (state === "queue") next("prefill");
      if (state === "prefill") next("decode");
    },
    finished(f) {
      if (state === "done") return;
      close();
      root.setAttributes({ "gen_ai.usage.output_tokens": f.outputTokens, "gen_ai.response.finish_reasons": [f.finishReason] });
      root.end();
    },
    failed(error) {
      if (state === "done") return;
      const during = state;
      phase?.setStatus({ code: SpanStatusCode.ERROR, message: error });
      close();
      root.setAttributes({ "error.type": error, "dispatch.failed_in": during });
      root.setStatus({ code: SpanStatusCode.ERROR, message: error });
      root.end();
    },
  };
}
