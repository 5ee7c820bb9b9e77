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
import type { Engine } from "../engine/engine";
import { toGenerateParams, toGenerateResponse, toKvEventBatch, toLoadReport } from "./convert";
import { toConnectError } from "./errors";
import type { ModelMeta, ServingState } from "./serving-state";
import type { EngineMetrics, RequestOutcome } from "../telemetry/engine-metrics";
import { observeGenerate } from "./observe";
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
      const obs = observeGenerate(metrics, { headers: ctx.requestHeader, model: engine.spec.modelId, requestId: req.requestId || undefined, promptTokens: req.promptTokenIds.length });
      let stream;
      try {
        stream = engine.generate({ ...toGenerateParams(req, ctx.timeoutMs()), observer: obs.observer });
      } catch (e) {
        const err = toConnectError(e);
        obs.rejected(REJECTED[err.code] ?? "internal", err.rawMessage);
        throw err;
      }
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
        tokenizer: { kind: "tiktoken", pattern: meta.tokenizer.pattern, ranks: meta.tokenizer.ranks, specialTokens: meta.tokenizer.specialTokens },
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
