/**
 * One engine SequenceObserver that feeds both the sequence's spans
 * (sequence-trace.ts) and the engine metrics (engine-metrics.ts): pass it as
 * `observer` in the engine's GenerateParams, and the engine's own hooks
 * (admitted / tokens / finished) drive queue wait, TTFT, inter-token latency,
 * cached prompt tokens, outcomes and the queue/prefill/decode spans.
 *
 * @example
 * const observer = createSequenceTelemetry({ headers: ctx.requestHeader, model, requestId, promptTokens, metrics });
 * engine.generate({ ...params, observer });
 */
import type { SequenceObserver } from "../engine/engine";
import type { FinishReason } from "../engine/sequence";
import type { EngineMetrics, RequestOutcome } from "./engine-metrics";
import { type SequenceTraceStart, startSequenceTrace } from "./sequence-trace";

/** What the trace needs, plus where the metrics go. */
export interface SequenceTelemetryOptions extends SequenceTraceStart {
  metrics?: EngineMetrics;
  now?: () => number;
}

const OUTCOME: Record<FinishReason, RequestOutcome> = {
  stop: "ok",
  length: "ok",
  cancelled: "cancelled",
  deadline: "deadline_exceeded",
  error: "internal",
};

export function createSequenceTelemetry(o: SequenceTelemetryOptions): Required<SequenceObserver> {
  const now = o.now ?? performance.now.bind(performance);
  const t0 = now();
  const trace = startSequenceTrace({ headers: o.headers, model: o.model, requestId: o.requestId, promptTokens: o.promptTokens, maxTokens: o.maxTokens, tracer: o.tracer });
  let last = 0;
  let first = true;
  return {
    admitted({ cachedTokens, batchSize, queueMs }) {
      trace.admitted({ cachedTokens, batchSize });
      o.metrics?.queueWait(queueMs / 1000);
      o.metrics?.prompt(o.promptTokens, cachedTokens);
    },
    tokens(count) {
      if (count <= 0) return;
      const t = now();
      if (first) {
        first = false;
        trace.firstToken();
        o.metrics?.firstToken((t - t0) / 1000);
      } else {
        // Several tokens in one step (speculative decoding) share the gap.
        const gap = (t - last) / 1000 / count;
        for (let i = 0; i < count; i++) o.metrics?.interToken(gap);
      }
      last = t;
      o.metrics?.generated(count);
    },
    finished({ outputTokens, reason }) {
      const outcome = OUTCOME[reason];
      o.metrics?.request(outcome);
      if (outcome === "ok") trace.finished({ outputTokens, finishReason: reason });
      else trace.failed(reason);
    },
  };
}
