/**
 * The rest of an OpenAI-compatible server's JSON API, for the vLLM / SGLang servers behind the gateway: any other
 * `POST /v1/...` whose body names a `model` (embeddings, rerank, score, moderations, pooling...) goes, as it is, to a
 * healthy OpenAI-HTTP backend serving that model (the least busy of this gateway's), and its answer comes back as
 * it is. A server that is unreachable or answers 429 / 5xx is retried on another, as generation requests are; per-key
 * request limits apply. A model that only dispatch model servers serve is a 404 naming what they serve.
 *
 * @example
 * POST /v1/embeddings {"model": "bge-m3", "input": "hello"}  ->  the backend's own answer
 */
import type { Hono } from "hono";
import { ANONYMOUS } from "../auth/access-control";
import { badRequest, GatewayError, modelNotFound, serviceUnavailable, toGatewayError } from "../errors";
import { parseJsonObject } from "../openai/parse-common";
import { withRetry } from "../workers/retry";
import { checkModelAccess, principalOf } from "./auth";
import type { GatewayDeps } from "./deps";
import { readBody } from "./read-body";

/** Answer headers worth passing on (the body's type; the server's request id). */
const KEPT = ["content-type", "x-request-id"];

export function registerPassthroughRoutes(app: Hono, deps: GatewayDeps): void {
  const { pool, config, metrics, access, log } = deps;
  app.post("/v1/*", async (c) => {
    const t0 = performance.now();
    const raw = await readBody(c.req.raw, config.server.max_body_bytes);
    const model = parseJsonObject(raw).model;
    if (typeof model !== "string" || model === "") throw badRequest("'model' is required (the model whose server takes this request).", "model", "missing_required_parameter");
    if (!pool.knows(model)) throw modelNotFound(model);
    checkModelAccess(c.req.raw, model);
    const path = c.req.path.slice("/v1".length);
    const grant = access ? await access.admit(principalOf(c.req.raw) ?? ANONYMOUS, 0) : undefined;
    const tried = new Set<string>();
    let status = 0;
    try {
      const res = await withRetry(
        async () => {
          const views = pool.candidates(model, tried);
          const members = views.map((v) => pool.get(v.id)!).filter((m) => m.backend.forward);
          if (members.length === 0) {
            if (views.length > 0 && tried.size === 0) {
              throw new GatewayError(404, `POST /v1${path} is not served for model '${model}': its servers are dispatch model servers (they serve chat, completions, responses and messages).`, "invalid_request_error", "unknown_url");
            }
            throw serviceUnavailable(`No healthy OpenAI-compatible backend serves model '${model}'.`, false);
          }
          const m = members.reduce((a, b) => (b.outstanding < a.outstanding ? b : a));
          const id = m.backend.id;
          tried.add(id);
          pool.acquire(id);
          try {
            const r = await m.backend.forward!(path, raw, c.req.raw.signal);
            // read whole: these answers are JSON documents, and the server's slot is held until they are
            return { status: r.status, headers: r.headers, body: await r.arrayBuffer() };
          } catch (err) {
            const ge = toGatewayError(err);
            if (ge.retryable && ge.status >= 500) pool.reportFailure(id, ge.message);
            throw ge;
          } finally {
            pool.release(id);
          }
        },
        { maxAttempts: config.retry.max_attempts, backoffMs: config.retry.backoff_ms, maxBackoffMs: config.retry.max_backoff_ms, signal: c.req.raw.signal },
      );
      status = res.status;
      const headers = new Headers();
      for (const k of KEPT) {
        const v = res.headers.get(k);
        if (v) headers.set(k, v);
      }
      if (grant) for (const [k, v] of Object.entries(grant.headers)) headers.set(k, v);
      return new Response(res.body, { status: res.status, headers });
    } catch (err) {
      status = toGatewayError(err).status;
      throw err;
    } finally {
      metrics.request("passthrough", status, false).inc();
      metrics.observeDuration("passthrough", (performance.now() - t0) / 1000);
      grant?.finish(0).catch((err) => log.warn("rate-limit charge failed", { error: String(err) }));
    }
  });
}
