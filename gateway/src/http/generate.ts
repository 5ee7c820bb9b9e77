/**
 * The gateway's one generation path, `POST /v1/chat/completions` and `POST /v1/completions` (and, through a
 * Presenter, the Responses and Messages APIs): parse -> choose -> call -> stream. Routing and failover run inside the one retry helper and
 * only until the first upstream output arrived; after that a failure becomes
 * one final SSE error event (streaming) or an error response (not streaming).
 * A client that goes away aborts the upstream call at once.
 */
import type { Context } from "hono";
import { ANONYMOUS } from "../auth/access-control";
import { checkPromptLength } from "../auth/limits";
import { GatewayError, gatewayTimeout, modelNotFound, serviceUnavailable, toGatewayError, tooManyRequests } from "../errors";
import { newResponseId } from "../openai/chunks";
import { parseChatRequest } from "../openai/parse-chat";
import { parseCompletionRequest } from "../openai/parse-completion";
import type { GenerationRequest } from "../openai/request";
import type { RouteRequest } from "../routing/policy";
import type { Call, Job } from "../workers/backend";
import { textRouteKey } from "../tokenize/text-blocks";
import { withRetry } from "../workers/retry";
import { checkModelAccess, principalOf } from "./auth";
import type { GatewayDeps } from "./deps";
import { ttftMark } from "../telemetry/ttft-marks";
import { readBody } from "./read-body";
import { type Outcome, sseResponse } from "./sse-response";

function finalError(err: GatewayError): GatewayError {
  return new GatewayError(err.status, err.message, err.type, err.code, err.param, false, { cause: err.cause });
}

/** Cap on the output tokens a request's max_tokens makes the router expect. */
const MAX_EXPECTED_OUTPUT = 1024;

/** Requests in flight across the generation endpoints (for `server.max_in_flight`). */
export interface InFlight {
  count: number;
}

/**
 * Runs a parsed generation request: admission, routing with failover, the upstream call, and the response (SSE or
 * one body). Shared by every generation route (`label` names the route in metrics and telemetry: "chat",
 * "completions", "responses", "messages").
 */
export type Generation = (c: Context, req: GenerationRequest, label: string, t0?: number, present?: Presenter) => Promise<Response>;

/** Another API's shape for a generation's output (the Responses API's events and body: http/responses.ts). */
export interface Presenter {
  /** The started call with its output (chat SSE frames, or the chat body) rewritten; stats and close delegated. */
  wrap(call: Call): Call;
  /** The last frame of a stream that failed after its first byte. */
  errorFrame(err: GatewayError): string;
}

export function createGeneration(deps: GatewayDeps, inFlight: InFlight = { count: 0 }): Generation {
  const { config, pool, router, log, metrics, access, telemetry } = deps;
  const maxInFlight = config.server.max_in_flight;
  const timeoutMs = config.server.request_timeout_ms;
  // Attempts still waiting for their first upstream output, per backend. A backend
  // ejected meanwhile (hung, dead) gives them up so they are retried elsewhere;
  // without this a request sent to a server that hangs waits forever.
  const waiting = new Map<string, Set<AbortController>>();
  pool.onChange((m) => {
    if (!m.healthy) for (const a of waiting.get(m.backend.id) ?? []) a.abort();
  });

  // t0: when the request arrived (its body read and parse count toward duration and TTFT)
  return async (c: Context, req: GenerationRequest, endpoint: string, t0 = performance.now(), present?: Presenter): Promise<Response> => {
    if (!pool.knows(req.model)) throw modelNotFound(req.model);
    checkModelAccess(c.req.raw, req.model);
    // a key's default priority for requests that set none (dispatch models; OpenAI-HTTP backends get the body as sent)
    if (req.priority === undefined) req.priority = principalOf(c.req.raw)?.priority;
    const profile = pool.profile(req.model);
    const prepared = profile?.prepare(req);
    // a batch of prompts (completions): each prepared on its own; the request is routed by the first
    const batch = profile && prepared && req.batch ? [prepared, ...req.batch.slice(1).map((p) => profile.prepare({ ...req, prompt: p, batch: undefined }))] : undefined;
    ttftMark("prepared");
    const promptTokens = batch ? batch.reduce((n, b) => n + b.tokenIds.length, 0) : (prepared?.tokenIds.length ?? 0);
    if (config.server.max_prompt_tokens > 0) {
      const longest = batch ? Math.max(...batch.map((b) => b.tokenIds.length)) : promptTokens;
      checkPromptLength({ promptTokens: longest, maxPromptTokens: config.server.max_prompt_tokens, contextLength: 0, param: req.endpoint === "chat" ? "messages" : "prompt" });
    }
    if (maxInFlight > 0 && inFlight.count >= maxInFlight) {
      throw tooManyRequests(`The gateway has ${inFlight.count} requests in flight (limit ${maxInFlight}); retry shortly.`);
    }
    // Per-key limits: one request and the prompt's tokens now, the completion's tokens in finish().
    const grant = access ? await access.admit(principalOf(c.req.raw) ?? ANONYMOUS, promptTokens) : undefined;
    const trace = telemetry?.start({
      endpoint,
      operation: req.endpoint === "chat" ? "chat" : "text_completion",
      model: req.model,
      stream: req.stream,
      route: c.req.path,
      maxTokens: req.maxTokens,
      temperature: req.sampling.temperature,
      topP: req.sampling.topP,
      headers: c.req.raw.headers,
    });

    // Long prefills and quiet streams must not hit Bun's idle timeout.
    (c.env as { timeout?: (r: Request, s: number) => void } | undefined)?.timeout?.(c.req.raw, 0);

    // The client's own signal cancels the upstream call when the client goes away (no
    // controller or listener of ours per request); a deadline, when configured, joins it.
    const clientSignal = c.req.raw.signal;
    const deadline = timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : null;
    const signal = deadline ? AbortSignal.any([clientSignal, deadline]) : clientSignal;
    /** The error to report for `err`: a passed deadline wins over the abort it caused. */
    const failure = (err: unknown) =>
      deadline?.aborted ? gatewayTimeout(`The request did not finish within server.request_timeout_ms (${timeoutMs} ms).`) : toGatewayError(err);
    inFlight.count++;

    const job: Job = { req, id: newResponseId(req.endpoint), created: Math.floor(Date.now() / 1000), prepared, batch, signal, traceHeaders: trace?.traceHeaders };
    const routeReq: RouteRequest = prepared
      ? {
          // Read when routing needs them (several candidates) or after the call went out (routed()).
          get blockHashes() {
            return prepared.blockHashes;
          },
          promptTokens: prepared.tokenIds.length,
          blockSize: profile!.blockSize,
        }
      : router.wantsPrefixes
        ? textRouteKey(req) // a backend whose tokenizer we do not know: its text blocks (approximate index)
        : { blockHashes: [], promptTokens: 0, blockSize: 0 };
    routeReq.affinityKey = req.affinityKey;
    // A generous max_tokens rarely runs out: the cap keeps it from outweighing queue and prefix terms.
    // n choices of each prompt are that many sequences on the server picked.
    if (req.maxTokens !== undefined) routeReq.expectedOutputTokens = Math.min(req.maxTokens, MAX_EXPECTED_OUTPUT) * req.n * (req.batch?.length ?? 1);
    const tried = new Set<string>();
    let last: GatewayError | undefined;
    let call: Call | undefined;
    let finished = false;
    let routed = false;

    const finish = (o: Outcome) => {
      if (finished) return;
      finished = true;
      inFlight.count--;
      // Stop the upstream in finally: a no-op after a normal end, a cancel otherwise
      // (client gone, stop string hit, failure, deadline).
      if (call) {
        call.close();
        pool.release(call.backendId);
        // Passive health: only a call that completed counts as good; one the upstream broke
        // mid-way counts as a failure (not a client cancel, not our own deadline, not the
        // gateway's own bug: a 500 is ours, and ejecting a healthy backend for it turns one
        // failed stream into a 503 for every request until the next probe).
        if (o.status === 200 && !o.error && !o.cancelled) pool.reportCallOk(call.backendId);
        else if (o.error && o.error.status > 500 && !clientSignal.aborted && !deadline?.aborted) pool.reportFailure(call.backendId, o.error.message);
      }
      // on-error.ts logs a 500 thrown before streaming; one after the first byte is logged here, with its cause.
      if (o.error?.status === 500 && o.streaming) {
        const cause = o.error.cause as Error | undefined;
        log.warn("stream failed", { id: job.id, code: o.error.code, message: o.error.message, ...(cause ? { cause: String(cause.stack ?? cause) } : {}) });
      }
      if (routed) router.finished(job.id);
      const ms = performance.now() - t0;
      metrics.request(endpoint, o.status, req.stream).inc();
      metrics.observeDuration(endpoint, ms / 1000);
      if (call) {
        metrics.tokens("prompt", call.stats.promptTokens);
        metrics.tokens("completion", call.stats.completionTokens);
      }
      trace?.end({
        status: o.status,
        inputTokens: call?.stats.promptTokens || routeReq.promptTokens,
        outputTokens: call?.stats.completionTokens,
        finishReasons: call?.stats.finishReason ? [call.stats.finishReason] : undefined,
        error: o.error?.code ?? undefined,
      });
      if (grant) grant.finish(call?.stats.completionTokens ?? 0).catch((err) => log.warn("rate-limit charge failed", { id: job.id, error: String(err) }));
      if (config.logging.requests) {
        log.info("request", {
          id: job.id,
          endpoint,
          model: req.model,
          stream: req.stream,
          status: o.status,
          backend: call?.backendId ?? null,
          attempts: tried.size,
          prompt_tokens: call?.stats.promptTokens || routeReq.promptTokens,
          completion_tokens: call?.stats.completionTokens ?? 0,
          finish_reason: call?.stats.finishReason ?? null,
          cancelled: o.cancelled,
          error: o.error?.code ?? null,
          ms: Math.round(ms * 100) / 100,
          ...(config.logging.log_prompts ? { prompt: req.messages ?? req.prompt } : {}),
        });
      }
    };

    try {
      call = await withRetry(
        async () => {
          const pick = router.pick(req.model, routeReq, tried);
          if (!pick) throw last ? finalError(last) : serviceUnavailable(`No healthy backend serves model '${req.model}'.`, false);
          const id = pick.member.backend.id;
          tried.add(id);
          pool.acquire(id);
          // The attempt's own signal: aborted by the client (or deadline) or by the backend's ejection.
          const attempt = new AbortController();
          if (signal.aborted) attempt.abort();
          else signal.addEventListener("abort", () => attempt.abort(), { once: true });
          let pending = waiting.get(id);
          if (!pending) waiting.set(id, (pending = new Set()));
          pending.add(attempt);
          ttftMark("routed");
          const opening = pick.member.backend.open({ ...job, signal: attempt.signal });
          try {
            // open() sends the request before its first await: the routing bookkeeping (prefix
            // index, load, its block hashes when nothing hashed them yet) runs while it travels.
            routed = true;
            router.routed(job.id, routeReq, id);
            trace?.routed(pick.decision, routeReq);
            return await opening;
          } catch (err) {
            pool.release(id);
            const ejected = attempt.signal.aborted && !signal.aborted;
            const ge = ejected ? serviceUnavailable(`Model server ${id} was ejected before its first output.`) : toGatewayError(err);
            if (ge.retryable && ge.status >= 500) pool.reportFailure(id, ge.message);
            last = ge;
            throw ge;
          } finally {
            pending.delete(attempt);
          }
        },
        {
          maxAttempts: config.retry.max_attempts,
          backoffMs: config.retry.backoff_ms,
          maxBackoffMs: config.retry.max_backoff_ms,
          signal,
          onRetry: (err, n) => {
            metrics.retry([...tried][n - 1] ?? "unknown");
            trace?.retry(n, [...tried][n - 1] ?? "unknown", err.code ?? String(err.status));
            log.warn("retrying on another backend", { id: job.id, attempt: n, status: err.status, message: err.message });
          },
        },
      );
    } catch (err) {
      const ge = failure(err);
      finish({ status: ge.status, cancelled: clientSignal.aborted, error: ge });
      throw ge;
    }
    if (present) call = present.wrap(call);
    router.firstToken(job.id);
    metrics.observeTtft(endpoint, (performance.now() - t0) / 1000);

    ttftMark("opened");
    const limitHeaders = grant?.headers;
    if (req.stream) {
      const res = sseResponse(call, job.id, { clientGone: () => clientSignal.aborted, failure, finish, onChunk: trace && (() => trace.chunk()), errorFrame: present?.errorFrame });
      if (limitHeaders) for (const k in limitHeaders) res.headers.set(k, limitHeaders[k]!);
      return res;
    }

    try {
      // One output in practice (the whole body); joined in case a backend yields several.
      const parts: (string | Uint8Array)[] = [];
      for (;;) {
        const out = await call.next();
        if (out === null) break;
        if (parts.length === 0) trace?.chunk();
        parts.push(out);
      }
      const body = parts.length === 1 ? parts[0]! : parts.map((p) => (typeof p === "string" ? p : new TextDecoder().decode(p))).join("");
      finish({ status: 200, cancelled: false });
      const headers: Record<string, string> = { "content-type": "application/json", "x-request-id": job.id };
      if (limitHeaders) for (const k in limitHeaders) headers[k] = limitHeaders[k]!;
      return new Response(body, { headers });
    } catch (err) {
      const ge = failure(err);
      finish({ status: ge.status, cancelled: clientSignal.aborted, error: ge });
      throw ge;
    }
  };
}

/** `POST /v1/chat/completions` or `POST /v1/completions`: the body parsed, then the shared generation path. */
export function createGenerateHandler(deps: GatewayDeps, endpoint: "chat" | "completions", generation: Generation) {
  const parse = endpoint === "chat" ? parseChatRequest : parseCompletionRequest;
  return async (c: Context): Promise<Response> => {
    const t0 = performance.now();
    ttftMark("handler");
    const raw = await readBody(c.req.raw, deps.config.server.max_body_bytes);
    ttftMark("body");
    const req = parse(raw);
    ttftMark("parsed");
    return generation(c, req, endpoint, t0);
  };
}
