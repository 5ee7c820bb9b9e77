/**
 * An OpenAI-compatible HTTP server (vLLM, SGLang, another gateway) as a
 * drop-in backend: the client's body is forwarded verbatim, streams are
 * parsed in layers (bytes -> lines -> events, `sse-parser.ts`) and re-framed
 * exactly as OpenAI frames them, and the upstream request is aborted in
 * `finally` whenever we stop reading early. Served models come from config or
 * from the server's `GET /v1/models` on each probe.
 *
 * @example
 * const b = createOpenAIBackend({ id: "vllm-0", url: "http://10.0.0.5:8000/v1" });
 */
import { badGateway, GatewayError, gatewayTimeout, serviceUnavailable, tooManyRequests } from "../errors";
import { createSseRelay } from "../openai/sse-relay";
import type { Backend, Call, CallStats, Job } from "./backend";

export interface OpenAIBackendOptions {
  id: string;
  /** Base URL including the version, e.g. http://host:8000/v1. */
  url: string;
  apiKey?: string;
  /** Fixed model list; empty: ask the server. */
  models?: readonly string[];
  /** Prometheus endpoint for load-aware routing; empty: `<url without /v1>/metrics`. */
  metricsUrl?: string;
}

/** Map an upstream error response to a GatewayError, keeping its message when it is OpenAI-shaped. */
async function upstreamError(res: Response, id: string): Promise<GatewayError> {
  let message = `Upstream ${id} answered HTTP ${res.status}.`;
  let type: string | null = null;
  let code: string | null = null;
  let param: string | null = null;
  try {
    const body = (await res.json()) as { error?: { message?: string; type?: string; code?: unknown; param?: unknown } };
    if (body.error?.message) {
      message = body.error.message;
      type = body.error.type ?? null;
      code = body.error.code == null ? null : String(body.error.code);
      param = typeof body.error.param === "string" ? body.error.param : null;
    }
  } catch {
    // not JSON: keep the generic message
  }
  const s = res.status;
  if (s === 429) return tooManyRequests(message, true);
  if (s >= 400 && s < 500) return new GatewayError(s, message, type ?? "invalid_request_error", code, param);
  if (s === 503) return serviceUnavailable(`Upstream ${id}: ${message}`);
  if (s === 504) return new GatewayError(504, `Upstream ${id}: ${message}`, "server_error", "upstream_timeout", null, true);
  return badGateway(`Upstream ${id}: ${message}`);
}

function fetchError(err: unknown, id: string, signal: AbortSignal): GatewayError {
  if (signal.aborted) return new GatewayError(499, "The request was cancelled.", "server_error", "cancelled");
  const e = err as { code?: string; name?: string; message?: string };
  if (e.name === "TimeoutError") return gatewayTimeout(`Upstream ${id} did not answer in time.`, err);
  return serviceUnavailable(`Upstream ${id} is unreachable: ${e.code ?? e.message ?? String(err)}`, true, err);
}

export function createOpenAIBackend(o: OpenAIBackendOptions): Backend {
  const base = o.url.replace(/\/+$/, "");
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (o.apiKey) headers.authorization = `Bearer ${o.apiKey}`;
  let models: readonly string[] = o.models ?? [];
  const fixedModels = (o.models?.length ?? 0) > 0;

  return {
    id: o.id,
    kind: "openai",
    url: base,
    metricsUrl: o.metricsUrl || undefined,
    models: () => models,
    profile: () => undefined,
    async probe(signal) {
      let res: Response;
      try {
        res = await fetch(`${base}/models`, { headers, signal });
      } catch (err) {
        throw fetchError(err, o.id, signal);
      }
      if (!res.ok) throw await upstreamError(res, o.id);
      const body = (await res.json()) as { data?: { id?: unknown }[] };
      if (!fixedModels) models = (body.data ?? []).map((m) => String(m.id));
    },
    async forward(path, body, signal) {
      let res: Response;
      try {
        res = await fetch(base + path, { method: "POST", headers, body, signal });
      } catch (err) {
        throw fetchError(err, o.id, signal);
      }
      if (res.status === 429 || res.status >= 500) throw await upstreamError(res, o.id);
      return res;
    },
    async open(job: Job): Promise<Call> {
      const path = job.req.endpoint === "chat" ? "/chat/completions" : "/completions";
      let res: Response;
      try {
        res = await fetch(base + path, { method: "POST", headers: hasAny(job.traceHeaders) ? { ...headers, ...job.traceHeaders } : headers, body: job.req.rawBody, signal: job.signal });
      } catch (err) {
        throw fetchError(err, o.id, job.signal);
      }
      if (res.status !== 200) throw await upstreamError(res, o.id);
      const stats: CallStats = { promptTokens: 0, completionTokens: 0, finishReason: null };
      if (!job.req.stream) {
        let body: Uint8Array | null;
        try {
          body = await res.bytes();
        } catch (err) {
          throw fetchError(err, o.id, job.signal);
        }
        return { backendId: o.id, stats, close() {}, next: async () => { const b = body; body = null; return b; } };
      }
      return openStream(res, o.id, job, stats);
    },
  };
}

/** Whether `h` holds any header (untraced requests carry an empty object: no copy of ours then). */
function hasAny(h: Record<string, string> | undefined): h is Record<string, string> {
  for (const _ in h) return true;
  return false;
}

/** Pull SSE events until at least one arrived, so failures before it can be retried. */
async function openStream(res: Response, id: string, job: Job, stats: CallStats): Promise<Call> {
  const reader = res.body!.getReader();
  const relay = createSseRelay();
  let ended = false;
  let opened = false;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    reader.cancel().catch(() => {});
  };

  async function pull(): Promise<string | Uint8Array | null> {
    while (!relay.done && !ended) {
      let r: Awaited<ReturnType<typeof reader.read>>;
      try {
        r = await reader.read();
      } catch (err) {
        throw fetchError(err, id, job.signal);
      }
      let out: string | Uint8Array;
      if (r.done) {
        ended = true;
        out = relay.end();
      } else {
        out = relay.push(r.value);
      }
      if (relay.done && relay.usage) {
        stats.promptTokens = relay.usage.promptTokens;
        stats.completionTokens = relay.usage.completionTokens;
      }
      if (out.length > 0) return out;
    }
    close();
    // Before the first event nothing reached the client: another backend may still serve it.
    if (!relay.done) throw badGateway(`Upstream ${id} closed the stream before [DONE].`, !opened);
    return null;
  }

  let first: string | Uint8Array | null;
  try {
    first = await pull();
    opened = true;
  } catch (err) {
    close();
    throw err;
  }
  return {
    backendId: id,
    stats,
    close,
    async next() {
      if (first !== null) {
        const f = first;
        first = null;
        return f;
      }
      if (relay.done) {
        close();
        return null;
      }
      return pull();
    },
  };
}
