/**
 * dispatch.v1.ModelService over the engine. Thin handlers: convert, call,
 * stream. Cancellation: when the caller goes away the Connect context aborts
 * and the sequence is cancelled (its blocks freed); the context also aborts
 * when a call ends normally, so a sequence that already finished is left alone.
 *
 * @example
 * const router = (r: ConnectRouter) => r.service(ModelService, createModelService(state));
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { HealthResponseSchema, ServingStatus } from "@dispatch/proto/gen/dispatch/v1/health_pb";
import { ModelInfoSchema } from "@dispatch/proto/gen/dispatch/v1/model_info_pb";
import type { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import type { Engine, SequenceObserver } from "../engine/engine";
import { toGenerateParams, toGenerateResponse, toKvEventBatch, toLoadReport } from "./convert";
import { toConnectError } from "./errors";
import type { ModelMeta, ServingState } from "./serving-state";
import type { EngineMetrics, RequestOutcome } from "../telemetry/engine-metrics";
import { createSequenceTelemetry } from "../telemetry/sequence-telemetry";
import { watchLoad } from "./watch-load";

function serving(state: ServingState): { engine: Engine; meta: ModelMeta } {
  if (state.status !== "serving" || !state.engine || !state.meta) {
    throw new ConnectError(`model server is not serving (${state.status}: ${state.message})`, Code.Unavailable);
  }
  return { engine: state.engine, meta: state.meta };
}

const REJECTED: Record<string, RequestOutcome> = {
  [Code.InvalidArgument]: "invalid_argument",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.Unavailable]: "unavailable",
};

export function createModelService(state: ServingState, metrics: EngineMetrics): ServiceImpl<typeof ModelService> {
  return {
    async *generate(req, ctx: HandlerContext) {
      let engine: Engine;
      try {
        engine = serving(state).engine;
        if (req.model && req.model !== engine.spec.modelId) {
          throw new ConnectError(`model "${req.model}" is not served here (this server serves "${engine.spec.modelId}")`, Code.InvalidArgument);
        }
      } catch (e) {
        const err = toConnectError(e);
        metrics.request(REJECTED[err.code] ?? "internal");
        throw err;
      }
      // Telemetry starts only for an admitted call (a refused one opens no span);
      // the engine calls no hook before generate() returns.
      let telemetry: SequenceObserver | null = null;
      const observer: SequenceObserver = {
        admitted: (a) => telemetry?.admitted?.(a),
        tokens: (n) => telemetry?.tokens?.(n),
        finished: (f) => telemetry?.finished?.(f),
      };
      let stream;
      try {
        stream = engine.generate({ ...toGenerateParams(req, ctx.timeoutMs()), observer });
      } catch (e) {
        const err = toConnectError(e);
        metrics.request(REJECTED[err.code] ?? "internal");
        throw err;
      }
      telemetry = createSequenceTelemetry({
        headers: ctx.requestHeader,
        model: engine.spec.modelId,
        requestId: stream.requestId,
        promptTokens: req.promptTokenIds.length,
        maxTokens: req.stop?.maxTokens,
        metrics,
      });
      let finished = false;
      const onAbort = () => {
        if (!finished) stream.cancel();
      };
      ctx.signal.addEventListener("abort", onAbort);
      try {
        for await (const out of stream) {
          if (out.finishReason) finished = true;
          yield toGenerateResponse(out);
        }
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
        if (!finished) stream.cancel();
      }
    },

    async *watchLoad(req, ctx) {
      const { engine } = serving(state);
      yield* watchLoad(engine, req.intervalMs, ctx.signal, (l) => toLoadReport(engine.serverId, l));
    },

    async *watchKvEvents(req, ctx) {
      const { engine } = serving(state);
      const sub = engine.kvFeed.subscribe({ snapshot: req.snapshot });
      const onAbort = () => sub.close();
      ctx.signal.addEventListener("abort", onAbort);
      try {
        for await (const batch of sub) yield toKvEventBatch(engine.serverId, engine.blockSize, batch);
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
        sub.close();
      }
    },

    async health() {
      const ok = state.status === "serving";
      return create(HealthResponseSchema, {
        status: ok ? ServingStatus.SERVING : ServingStatus.NOT_SERVING,
        message: state.message,
      });
    },

    async getModelInfo() {
      const { engine, meta } = serving(state);
      const spec = engine.spec;
      return create(ModelInfoSchema, {
        modelId: spec.modelId,
        architecture: spec.architecture,
        tokenizer: { kind: "tiktoken", pattern: meta.tokenizer.pattern, ranks: meta.tokenizer.ranks, specialTokens: meta.tokenizer.specialTokens, textTokenIds: meta.tokenizer.textTokenIds ?? [] },
        chatTemplate: meta.chatTemplate,
        bosToken: meta.bosToken,
        eosToken: meta.eosToken,
        eosTokenIds: spec.eosTokenIds,
        blockSize: engine.blockSize,
        maxContext: engine.maxLen,
        vocabSize: spec.vocabSize,
        serverId: engine.serverId,
        backend: engine.backend,
      });
    },
  };
}
