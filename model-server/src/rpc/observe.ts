/**
 * Per-request telemetry for Generate: Prometheus event metrics and the
 * queue/prefill/decode spans (joined to the caller's trace through its
 * `traceparent` header), fed by the engine's sequence callbacks.
 *
 * @example
 * const obs = observeGenerate(metrics.engine, { headers: ctx.requestHeader, model, requestId, promptTokens });
 * engine.generate({ ...params, observer: obs.observer });
 * // on a rejected call: obs.rejected("resource_exhausted")
 */
import type { FinishReason } from "../engine/sequence";
import type { SequenceObserver } from "../engine/engine";
import type { EngineMetrics, RequestOutcome } from "../telemetry/engine-metrics";
import { startSequenceTrace } from "../telemetry/sequence-trace";

const OUTCOME: Record<FinishReason, RequestOutcome> = {
  stop: "ok",
  length: "ok",
  cancelled: "cancelled",
  deadline: "deadline_exceeded",
  error: "internal",
};

export interface GenerateObservation {
  observer: SequenceObserver;
  rejected(outcome: RequestOutcome, message: string): void;
}

export function observeGenerate(m: EngineMetrics, o: { headers: Headers; model: string; requestId?: string; promptTokens: number }): GenerateObservation {
  const trace = startSequenceTrace(o);
  const arrival = performance.now();
  let last = 0;
  return {
    observer: {
      admitted(a) {
        m.queueWait(a.queueMs / 1000);
        m.prompt(o.promptTokens, a.cachedTokens);
        trace.admitted({ cachedTokens: a.cachedTokens, batchSize: a.batchSize });
      },
      tokens(count) {
        const now = performance.now();
        if (last === 0) {
          m.firstToken((now - arrival) / 1000);
          trace.firstToken();
        } else {
          // Several tokens at once (a verify step): spread the interval over them.
          for (let i = 0; i < count; i++) m.interToken((now - last) / 1000 / count);
        }
        last = now;
      },
      finished(f) {
        m.generated(f.outputTokens);
        m.request(OUTCOME[f.reason]);
        if (f.reason === "stop" || f.reason === "length") trace.finished({ outputTokens: f.outputTokens, finishReason: f.reason });
        else trace.failed(f.reason);
      },
    },
    rejected(outcome, message) {
      m.request(outcome);
      trace.failed(message);
    },
  };
}
