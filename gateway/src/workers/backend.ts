/**
 * What the gateway needs from any backend, whatever it speaks. Two kinds
 * implement it: `dispatch-backend.ts` (Connect-RPC, token ids) and
 * `openai-backend.ts` (an OpenAI-compatible HTTP server such as vLLM).
 */
import type { GenerationRequest } from "../openai/request";
import type { ModelProfile, PreparedPrompt } from "../tokenize/model-profile";

/** One request as a backend sees it. */
export interface Job {
  req: GenerationRequest;
  /** Response id (chatcmpl-... / cmpl-...), also sent upstream as the request id. */
  id: string;
  created: number;
  /** The rendered, tokenized prompt (dispatch models only). */
  prepared?: PreparedPrompt;
  /** A batch of prompts (completions), each prepared; `prepared` is the first (dispatch models only). */
  batch?: PreparedPrompt[];
  /** Aborts the upstream call (client gone, or the gateway stops early). */
  signal: AbortSignal;
  /** W3C trace context (`traceparent`, `tracestate`) for the upstream call's headers. */
  traceHeaders?: Record<string, string>;
}

/** Counters a call fills in as it runs, for logs and metrics. */
export interface CallStats {
  promptTokens: number;
  completionTokens: number;
  finishReason: string | null;
  /** Prompt tokens the server took from its prefix cache, once known (dispatch backends). */
  cachedPromptTokens?: number;
  /** Tokens of a reasoning model's thinking block, once known (dispatch backends, the reasoning parser on). */
  reasoningTokens?: number;
}

/**
 * A call whose first upstream output already arrived: from here on a failure
 * can no longer be retried elsewhere.
 */
export interface Call {
  readonly backendId: string;
  /**
   * Next client-ready output: SSE frames when streaming, the JSON body
   * otherwise, as text or as bytes relayed unchanged; null at the end.
   */
  next(): Promise<string | Uint8Array | null>;
  /**
   * Output that needs no waiting (the first step, already received), taken synchronously so
   * the first SSE chunk goes out without a trip through the microtask queue, behind whatever
   * else is queued there; "" or undefined: none, use next(). Throws as next() would.
   */
  ready?(): string | undefined;
  /** Stop the upstream call now (idempotent). */
  close(): void;
  readonly stats: CallStats;
}

export interface Backend {
  readonly id: string;
  readonly kind: "dispatch" | "openai";
  readonly url: string;
  /** OpenAI-HTTP backends: their Prometheus endpoint for load (default: derived from `url`). */
  readonly metricsUrl?: string;
  /** Models served, as of the last successful probe (or from config). */
  models(): readonly string[];
  /** The model profile (tokenizer, template), for dispatch backends. */
  profile(model: string): ModelProfile | undefined;
  /** Health probe: resolves when the backend can take work; refreshes what it serves. */
  probe(signal: AbortSignal): Promise<void>;
  /** Start a call; resolves when the first output arrived, rejects with a GatewayError. */
  open(job: Job): Promise<Call>;
  /**
   * OpenAI-HTTP backends: POST another of the server's JSON routes (`path` under its `/v1`, e.g. "/embeddings") with
   * `body` as it is; resolves with the server's answer (2xx and 4xx as they are), rejects with a GatewayError when it
   * is unreachable or answers 429 / 5xx (another server may do better).
   */
  forward?(path: string, body: string, signal: AbortSignal): Promise<Response>;
}
