/**
 * W3C trace context (`traceparent`, `tracestate`) in and out of plain header
 * objects. Uses the W3C propagator directly rather than the global one, so
 * context travels to the model servers even when tracing is off here (a
 * sampled trace begun by the client or an upstream proxy stays one trace).
 *
 * @example
 * const headers = new Headers();
 * injectTraceHeaders(span.context, headers);          // gateway -> Connect call headers
 * const parent = extractTraceContext(req.headers);    // model server <- Connect request headers
 */
import { context as otelContext, type Context, ROOT_CONTEXT, type TextMapGetter, type TextMapSetter } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

const propagator = new W3CTraceContextPropagator();

type HeaderBag = Headers | Record<string, string>;

const setter: TextMapSetter<HeaderBag> = {
  set(carrier, key, value) {
    if (carrier instanceof Headers) carrier.set(key, value);
    else carrier[key] = value;
  },
};

const getter: TextMapGetter<HeaderBag> = {
  get(carrier, key) {
    if (carrier instanceof Headers) return carrier.get(key) ?? undefined;
    const hit = Object.keys(carrier).find((k) => k.toLowerCase() === key);
    return hit === undefined ? undefined : carrier[hit];
  },
  keys(carrier) {
    return carrier instanceof Headers ? [...carrier.keys()] : Object.keys(carrier);
  },
};

/** Writes `traceparent`/`tracestate` for the span in `ctx` (the active context by default). */
export function injectTraceHeaders(ctx: Context | undefined, headers: HeaderBag): void {
  propagator.inject(ctx ?? otelContext.active(), headers, setter);
}

/** The remote parent carried by `headers` (ROOT_CONTEXT based), for the server side of a call. */
export function extractTraceContext(headers: HeaderBag, base: Context = ROOT_CONTEXT): Context {
  return propagator.extract(base, headers, getter);
}
