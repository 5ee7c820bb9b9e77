/**
 * Protobuf <-> engine conversions. Only rpc/ touches generated code; the engine
 * sees plain objects.
 */
import { create } from "@bufbuild/protobuf";
import { FinishReason, GenerateResponseSchema, ResponseFormat, TokenLogprobSchema, UsageSchema, type GenerateRequest, type GenerateResponse } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { KvEventBatchSchema, KvEventSchema, type KvEventBatch } from "@dispatch/proto/gen/dispatch/v1/kv_events_pb";
import { LoadReportSchema, type LoadReport } from "@dispatch/proto/gen/dispatch/v1/load_pb";
import type { KvCacheEvent } from "../engine/block-manager";
import type { GenerateOutput, GenerateParams } from "../engine/engine";
import type { KvBatch } from "../engine/kv-feed";
import type { LoadSnapshot } from "../engine/load-tracker";
import type { FinishReason as EngineFinish } from "../engine/sequence";

const FINISH: Record<EngineFinish, FinishReason> = {
  stop: FinishReason.STOP,
  length: FinishReason.LENGTH,
  cancelled: FinishReason.CANCELLED,
  deadline: FinishReason.DEADLINE_EXCEEDED,
  error: FinishReason.ERROR,
};

/** The proto map as the engine's (undefined when empty). */
function logitBias(m: { [token: number]: number }): Map<number, number> | undefined {
  const keys = Object.keys(m);
  return keys.length === 0 ? undefined : new Map(keys.map((k) => [Number(k), m[Number(k)]!]));
}

/** The response format; a json_schema that is not JSON text is the engine's invalid_argument (an unparsable schema). */
function responseFormatOf(req: GenerateRequest): Pick<GenerateParams, "responseFormat" | "jsonSchema" | "jsonPrefix" | "jsonSuffix" | "jsonThinking"> {
  const thinking: GenerateParams["jsonThinking"] = req.jsonThinking === "may" || req.jsonThinking === "inside" ? req.jsonThinking : undefined;
  const frame = { jsonPrefix: req.jsonPrefix || undefined, jsonSuffix: req.jsonSuffix || undefined, jsonThinking: thinking };
  if (req.responseFormat === ResponseFormat.JSON_OBJECT) return { responseFormat: "json_object", ...frame };
  if (req.responseFormat !== ResponseFormat.JSON_SCHEMA) return { responseFormat: "text" };
  let jsonSchema: unknown;
  try {
    jsonSchema = JSON.parse(req.jsonSchema);
  } catch {
    jsonSchema = "(json_schema is not JSON text)";
  }
  return { responseFormat: "json_schema", jsonSchema, ...frame };
}

/** `timeoutMs`: the RPC's own deadline, if the caller set one; the earlier of the two wins. */
export function toGenerateParams(req: GenerateRequest, timeoutMs: number | undefined): GenerateParams {
  const s = req.sampling;
  const st = req.stop;
  let deadlineMs = Number(req.deadlineUnixMs);
  if (timeoutMs !== undefined && timeoutMs > 0) {
    const rpcDeadline = Date.now() + timeoutMs;
    deadlineMs = deadlineMs > 0 ? Math.min(deadlineMs, rpcDeadline) : rpcDeadline;
  }
  return {
    requestId: req.requestId || undefined,
    promptTokenIds: req.promptTokenIds,
    sampling: s
      ? {
          temperature: s.temperature,
          topP: s.topP === 0 ? 1 : s.topP,
          topK: s.topK,
          seed: s.seed,
          frequencyPenalty: s.frequencyPenalty,
          presencePenalty: s.presencePenalty,
          logitBias: logitBias(s.logitBias),
        }
      : undefined,
    stop: st ? { maxTokens: st.maxTokens, stopTokenIds: st.stopTokenIds, ignoreEos: st.ignoreEos, minTokens: st.minTokens } : undefined,
    deadlineMs,
    returnText: req.returnText,
    topLogprobs: req.topLogprobs,
    ...responseFormatOf(req),
    priority: req.priority,
  };
}

export function toGenerateResponse(o: GenerateOutput): GenerateResponse {
  return create(GenerateResponseSchema, {
    tokenIds: o.tokenIds,
    textDelta: o.textDelta,
    finishReason: o.finishReason ? FINISH[o.finishReason] : FinishReason.UNSPECIFIED,
    usage: o.usage ? create(UsageSchema, o.usage) : undefined,
    logprobs: o.logprobs.map((l) =>
      create(TokenLogprobSchema, {
        tokenId: l.token,
        logprob: l.logprob,
        topTokenIds: l.top.map((t) => t.token),
        topLogprobs: l.top.map((t) => t.logprob),
      }),
    ),
    queueTimeMs: o.queueTimeMs ?? 0,
  });
}

export function toLoadReport(serverId: string, l: LoadSnapshot): LoadReport {
  return create(LoadReportSchema, {
    serverId,
    running: l.running,
    waiting: l.waiting,
    queuedPrefillTokens: BigInt(l.queuedPrefillTokens),
    kvBlocksUsed: l.kvBlocksUsed,
    kvBlocksTotal: l.kvBlocksTotal,
    kvBlocksCached: l.kvBlocksCached,
    timestampUnixMs: BigInt(l.timestampMs),
    prefillTokensPerS: l.prefillTokensPerS,
    decodeStepsPerS: l.decodeStepsPerS,
    maxQueue: l.maxQueue,
  });
}

function toKvEvent(e: KvCacheEvent) {
  switch (e.kind) {
    case "stored":
      return create(KvEventSchema, { event: { case: "stored", value: { blockHashes: e.hashes, parentHash: e.parent } } });
    case "evicted":
      return create(KvEventSchema, { event: { case: "evicted", value: { blockHashes: e.hashes } } });
    case "cleared":
      return create(KvEventSchema, { event: { case: "cleared", value: {} } });
  }
}

export function toKvEventBatch(serverId: string, blockSize: number, b: KvBatch): KvEventBatch {
  return create(KvEventBatchSchema, {
    serverId,
    sequence: BigInt(b.sequence),
    events: b.events.map(toKvEvent),
    timestampUnixMs: BigInt(b.timestampMs),
    snapshot: b.snapshot,
    blockSize,
  });
}
