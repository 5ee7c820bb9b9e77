/**
 * The gateway's client for one dispatch model server. The only module that
 * touches generated protobuf code and Connect transports: it speaks plain
 * gateway types outward and converts every RPC failure once, here
 * (`ConnectError.from` -> GatewayError via `rpc-errors.ts`).
 *
 * Protocols: "connect" (HTTP/1.1, what Bun.serve speaks), "grpc" (HTTP/2,
 * h2c or TLS) and "grpc-web" (HTTP/1.1).
 *
 * @example
 * const client = createModelClient({ url: "http://127.0.0.1:9000", protocol: "connect" });
 * const info = await client.modelInfo(AbortSignal.timeout(2000));
 * for await (const step of client.generate(params, signal)) use(step.tokenIds);
 */
import { create, type DescMessage, fromBinary, type MessageInitShape, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { FinishReason, type GenerateRequest, GenerateRequestSchema, type GenerateResponse, GenerateResponseSchema, ResponseFormat } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { ServingStatus } from "@dispatch/proto/gen/dispatch/v1/health_pb";
import { KvEventBatchSchema, WatchKvEventsRequestSchema } from "@dispatch/proto/gen/dispatch/v1/kv_events_pb";
import { LoadReportSchema, WatchLoadRequestSchema } from "@dispatch/proto/gen/dispatch/v1/load_pb";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import type { ModelInfoView } from "../tokenize/model-profile";
import { connectServerStream } from "./connect-stream";
import { encodeGenerateRequest, fastEncodeOn } from "./generate-request";
import { createSocketStreams } from "./socket-stream";
import { fromRpcError } from "./rpc-errors";

export type RpcProtocol = "connect" | "grpc" | "grpc-web";

export interface GenerateParams {
  requestId: string;
  model: string;
  promptTokenIds: Uint32Array;
  temperature?: number;
  topP?: number;
  topK?: number;
  seed?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** Token id -> bias added to its logit (OpenAI's logit_bias). */
  logitBias?: Record<number, number>;
  maxTokens?: number;
  minTokens?: number;
  stopTokenIds: number[];
  ignoreEos?: boolean;
  deadlineUnixMs?: number;
  /** Top alternatives to report per generated token (0-20; the chosen token's log-probability always comes back). */
  topLogprobs?: number;
  /** The output is one JSON object (OpenAI's response_format json_object). */
  jsonObject?: boolean;
  /** The output is one JSON object of this schema (JSON text; OpenAI's response_format json_schema). */
  jsonSchema?: string;
  /** JSON mode: literal text before and after the object (a forced tool call's tags). */
  jsonPrefix?: string;
  jsonSuffix?: string;
  /** JSON mode on a reasoning model: a <think> block may open the output, or the prompt opened one. */
  jsonThinking?: "may" | "inside";
  /** Scheduling priority on the server: lower first (vLLM's). */
  priority?: number;
}

const NO_LOGPROBS: TokenLogprob[] = [];

/** A generated token's raw log-probability and, when asked for, its best alternatives (best first). */
export interface TokenLogprob {
  tokenId: number;
  logprob: number;
  top: { tokenId: number; logprob: number }[];
}

export type StepFinish = "stop" | "length" | "cancelled" | "deadline" | "error" | null;

/** One engine step's output for this sequence. */
export interface GenerateStep {
  tokenIds: number[];
  finish: StepFinish;
  usage?: { promptTokens: number; completionTokens: number; cachedPromptTokens: number };
  /** One per token of tokenIds when GenerateParams.topLogprobs was given; else empty. */
  logprobs: TokenLogprob[];
}

export interface LoadView {
  serverId: string;
  running: number;
  waiting: number;
  queuedPrefillTokens: number;
  kvBlocksUsed: number;
  kvBlocksTotal: number;
  kvBlocksCached: number;
  timestampUnixMs: number;
  prefillTokensPerS: number;
  decodeStepsPerS: number;
  maxQueue: number;
}

export type KvEventView =
  | { kind: "stored"; blockHashes: bigint[]; parentHash: bigint }
  | { kind: "evicted"; blockHashes: bigint[] }
  | { kind: "cleared" };

export interface KvEventBatchView {
  serverId: string;
  sequence: bigint;
  events: KvEventView[];
  timestampUnixMs: number;
  snapshot: boolean;
  blockSize: number;
}

export interface ModelClient {
  health(signal: AbortSignal): Promise<{ serving: boolean; message: string }>;
  modelInfo(signal: AbortSignal): Promise<ModelInfoView>;
  /** `headers` travel with the call (trace context). */
  generate(params: GenerateParams, signal: AbortSignal, headers?: Record<string, string>): AsyncIterable<GenerateStep>;
  watchLoad(intervalMs: number, signal: AbortSignal): AsyncIterable<LoadView>;
  watchKvEvents(snapshot: boolean, signal: AbortSignal): AsyncIterable<KvEventBatchView>;
}

const FINISH: Record<number, StepFinish> = {
  [FinishReason.UNSPECIFIED]: null,
  [FinishReason.STOP]: "stop",
  [FinishReason.LENGTH]: "length",
  [FinishReason.CANCELLED]: "cancelled",
  [FinishReason.DEADLINE_EXCEEDED]: "deadline",
  [FinishReason.ERROR]: "error",
};

function transportFor(url: string, protocol: RpcProtocol) {
  switch (protocol) {
    case "connect":
      return createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: true });
    case "grpc":
      return createGrpcTransport({ baseUrl: url });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1" });
  }
}

/**
 * Generate streams over fetch at once, process-wide. Bun's fetch runs at most
 * BUN_CONFIG_MAX_HTTP_REQUESTS (default 256) requests at a time per process and
 * queues the rest (OpenAI-HTTP backends and probes use it too), so past `max`
 * a call goes over the Connect transport, which has no such cap: the fast path
 * for the first couple of hundred streams, no queueing beyond.
 */
export interface FetchStreamBudget {
  inFlight: number;
  max: number;
}

function toMessage(p: GenerateParams): GenerateRequest {
  return create(GenerateRequestSchema, {
    requestId: p.requestId,
    model: p.model,
    promptTokenIds: Array.from(p.promptTokenIds),
    sampling: {
      temperature: p.temperature ?? 1,
      topP: p.topP ?? 0,
      topK: p.topK !== undefined && p.topK > 0 ? p.topK : 0,
      seed: p.seed === undefined ? undefined : BigInt(p.seed),
      frequencyPenalty: p.frequencyPenalty ?? 0,
      presencePenalty: p.presencePenalty ?? 0,
      logitBias: p.logitBias ?? {},
    },
    stop: {
      maxTokens: p.maxTokens ?? 0,
      stopTokenIds: p.stopTokenIds,
      ignoreEos: p.ignoreEos ?? false,
      minTokens: p.minTokens ?? 0,
    },
    deadlineUnixMs: BigInt(p.deadlineUnixMs ?? 0),
    returnText: false,
    topLogprobs: p.topLogprobs ?? 0,
    responseFormat: p.jsonSchema !== undefined ? ResponseFormat.JSON_SCHEMA : p.jsonObject ? ResponseFormat.JSON_OBJECT : ResponseFormat.UNSPECIFIED,
    jsonSchema: p.jsonSchema ?? "",
    jsonPrefix: p.jsonPrefix ?? "",
    jsonSuffix: p.jsonSuffix ?? "",
    jsonThinking: p.jsonThinking ?? "",
    priority: p.priority ?? 0,
  });
}

/** The protobuf-es message for `p` (the transports' path; the reference for generate-request.ts). */
export { toMessage as generateRequestMessage };

export const FETCH_STREAMS: FetchStreamBudget = { inFlight: 0, max: Math.max(0, (Number(process.env.BUN_CONFIG_MAX_HTTP_REQUESTS) || 256) - 32) };

/** `DISPATCH_GENERATE_FETCH=1`: Generate over fetch (connect-stream.ts), not over our own sockets. */
const socketsOn = process.env.DISPATCH_GENERATE_FETCH !== "1";
const GENERATE = "dispatch.v1.ModelService/Generate";
/**
 * Messages a watch stream takes through a gRPC or gRPC-Web transport before it ends and is opened again
 * (backend-streams.ts reopens it at once): see `watch` below.
 */
export const TRANSPORT_WATCH_MAX_MESSAGES = 10_000;

export function createModelClient(opts: {
  url: string;
  protocol: RpcProtocol;
  /** Tests: a budget of their own. */
  fetchStreams?: FetchStreamBudget;
  /** Generate over our own HTTP/1.1 sockets (default: unless DISPATCH_GENERATE_FETCH=1; plain http only). */
  sockets?: boolean;
  /** Bound on opening a Generate connection over the sockets (default 3000; 0: none); fetch has no connect bound. */
  connectTimeoutMs?: number;
  /** gRPC / gRPC-Web: messages a watch stream takes before it ends (default TRANSPORT_WATCH_MAX_MESSAGES; tests). */
  transportWatchMaxMessages?: number;
}): ModelClient {
  const client = createClient(ModelService, transportFor(opts.url, opts.protocol));
  const where = opts.url;
  const base = opts.url.replace(/\/+$/, "");
  const budget = opts.fetchStreams ?? FETCH_STREAMS;
  const sockets = opts.protocol === "connect" && (opts.sockets ?? socketsOn) && base.startsWith("http://") ? createSocketStreams(base, { connectTimeoutMs: opts.connectTimeoutMs }) : null;
  /**
   * Generate's responses for Connect (the hot path): over our own sockets (socket-stream.ts), else over fetch
   * (connect-stream.ts) within the budget, else the transport.
   */
  const generateCall: (p: GenerateParams, signal: AbortSignal, headers?: Record<string, string>) => AsyncIterable<GenerateResponse> =
    sockets
      ? async function* (p, signal, headers) {
          const request = (fastEncodeOn && encodeGenerateRequest(p)) || toBinary(GenerateRequestSchema, toMessage(p));
          for await (const bytes of sockets.call({ method: GENERATE, request, signal, headers })) yield fromBinary(GenerateResponseSchema, bytes);
        }
      : opts.protocol === "connect"
      ? async function* (p, signal, headers) {
          if (budget.inFlight >= budget.max) {
            yield* client.generate(toMessage(p), { signal, headers });
            return;
          }
          budget.inFlight++;
          try {
            const request = (fastEncodeOn && encodeGenerateRequest(p)) || toBinary(GenerateRequestSchema, toMessage(p));
            for await (const bytes of connectServerStream({ url: base, method: GENERATE, request, signal, headers })) {
              yield fromBinary(GenerateResponseSchema, bytes);
            }
          } finally {
            budget.inFlight--;
          }
        }
      : (p, signal, headers) => client.generate(toMessage(p), { signal, headers });
  /**
   * A watch stream's messages (WatchLoad, WatchKvEvents: open as long as the backend is healthy). Not through
   * connect-es's call where we can help it: its call loop races each read against a promise that stays pending
   * for the whole call (run-call.js in @connectrpc/connect 2.3.0; connectrpc/connect-es#1524), so every message
   * stayed reachable until the call ended: 10 load reports a second and a KV batch per engine step grew the
   * gateway by ~25 MiB/min in the GPU soak (docs/reliability.md, "The GPU soak"). Connect calls go over the
   * socket streams (or fetch) instead; gRPC and gRPC-Web keep the transport and end each stream after
   * TRANSPORT_WATCH_MAX_MESSAGES, so what it holds stays bounded.
   */
  async function* watch<In extends DescMessage, Out extends DescMessage>(
    name: string,
    input: In,
    init: MessageInitShape<In>,
    output: Out,
    signal: AbortSignal,
    viaTransport: () => AsyncIterable<MessageShape<Out>>,
  ): AsyncGenerator<MessageShape<Out>, void, undefined> {
    if (opts.protocol !== "connect") {
      let n = 0;
      for await (const m of viaTransport()) {
        yield m;
        if (++n >= (opts.transportWatchMaxMessages ?? TRANSPORT_WATCH_MAX_MESSAGES)) return;
      }
      return;
    }
    const method = `dispatch.v1.ModelService/${name}`;
    const request = toBinary(input, create(input, init));
    const frames = sockets ? sockets.call({ method, request, signal }) : connectServerStream({ url: base, method, request, signal });
    for await (const bytes of frames) yield fromBinary(output, bytes);
  }
  return {
    async health(signal) {
      try {
        const r = await client.health({}, { signal });
        return { serving: r.status === ServingStatus.SERVING, message: r.message };
      } catch (err) {
        throw fromRpcError(err, where);
      }
    },
    async modelInfo(signal) {
      try {
        const r = await client.getModelInfo({}, { signal });
        return {
          modelId: r.modelId,
          tokenizer: {
            kind: r.tokenizer?.kind ?? "",
            pattern: r.tokenizer?.pattern ?? "",
            ranks: r.tokenizer?.ranks ?? new Uint8Array(0),
            specialTokens: { ...(r.tokenizer?.specialTokens ?? {}) },
            textTokenIds: [...(r.tokenizer?.textTokenIds ?? [])],
          },
          chatTemplate: r.chatTemplate,
          bosToken: r.bosToken,
          eosToken: r.eosToken,
          eosTokenIds: [...r.eosTokenIds],
          blockSize: r.blockSize,
          maxContext: r.maxContext,
          serverId: r.serverId,
        };
      } catch (err) {
        throw fromRpcError(err, where);
      }
    },
    async *generate(p, signal, headers) {
      const call = generateCall(p, signal, headers);
      const wantLogprobs = p.topLogprobs !== undefined; // else the steps' logprobs are left unread (hot path)
      try {
        for await (const r of call) {
          const u = r.usage;
          yield {
            tokenIds: r.tokenIds,
            finish: r.finishReason in FINISH ? FINISH[r.finishReason]! : "error",
            usage: u ? { promptTokens: u.promptTokens, completionTokens: u.completionTokens, cachedPromptTokens: u.cachedPromptTokens } : undefined,
            logprobs: wantLogprobs ? r.logprobs.map((l) => ({ tokenId: l.tokenId, logprob: l.logprob, top: l.topTokenIds.map((id, i) => ({ tokenId: id, logprob: l.topLogprobs[i]! })) })) : NO_LOGPROBS,
          };
        }
      } catch (err) {
        throw fromRpcError(err, where);
      }
    },
    async *watchLoad(intervalMs, signal) {
      try {
        for await (const r of watch("WatchLoad", WatchLoadRequestSchema, { intervalMs }, LoadReportSchema, signal, () => client.watchLoad({ intervalMs }, { signal }))) {
          yield {
            serverId: r.serverId,
            running: r.running,
            waiting: r.waiting,
            queuedPrefillTokens: Number(r.queuedPrefillTokens),
            kvBlocksUsed: r.kvBlocksUsed,
            kvBlocksTotal: r.kvBlocksTotal,
            kvBlocksCached: r.kvBlocksCached,
            timestampUnixMs: Number(r.timestampUnixMs),
            prefillTokensPerS: r.prefillTokensPerS,
            decodeStepsPerS: r.decodeStepsPerS,
            maxQueue: r.maxQueue,
          };
        }
      } catch (err) {
        throw fromRpcError(err, where);
      }
    },
    async *watchKvEvents(snapshot, signal) {
      try {
        for await (const b of watch("WatchKvEvents", WatchKvEventsRequestSchema, { snapshot }, KvEventBatchSchema, signal, () => client.watchKvEvents({ snapshot }, { signal }))) {
          const events: KvEventView[] = [];
          for (const e of b.events) {
            const ev = e.event;
            if (ev.case === "stored") events.push({ kind: "stored", blockHashes: ev.value.blockHashes, parentHash: ev.value.parentHash });
            else if (ev.case === "evicted") events.push({ kind: "evicted", blockHashes: ev.value.blockHashes });
            else if (ev.case === "cleared") events.push({ kind: "cleared" });
          }
          yield {
            serverId: b.serverId,
            sequence: b.sequence,
            events,
            timestampUnixMs: Number(b.timestampUnixMs),
            snapshot: b.snapshot,
            blockSize: b.blockSize,
          };
        }
      } catch (err) {
        throw fromRpcError(err, where);
      }
    },
  };
}
