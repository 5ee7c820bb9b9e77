/**
 * Streams a started call to the client as SSE. Frames come ready-made from
 * the call; a failure after the first byte becomes one final
 * `data: {"error":{...}}` event and a clean close; a client that goes away
 * cancels the stream, which aborts the upstream call.
 */
import type { GatewayError } from "../errors";
import { errorFrame } from "../openai/chunks";
import type { Call } from "../workers/backend";

export interface Outcome {
  status: number;
  cancelled: boolean;
  error?: GatewayError;
  /** The failure came after the response began streaming (no error response will log it). */
  streaming?: boolean;
}

const encoder = new TextEncoder();

export interface StreamHooks {
  /** The client went away (its request signal aborted). */
  clientGone(): boolean;
  /** The GatewayError to report for a failure (a passed deadline becomes a 504). */
  failure(err: unknown): GatewayError;
  finish(o: Outcome): void;
  /** One output went to the client (telemetry: first token, inter-token latency). */
  onChunk?(): void;
}

export function sseResponse(call: Call, id: string, h: StreamHooks): Response {
  const finish = h.finish;
  const stream = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const out = await call.next();
        if (out === null) {
          finish({ status: 200, cancelled: false });
          ctrl.close();
        } else {
          ctrl.enqueue(typeof out === "string" ? encoder.encode(out) : out);
          h.onChunk?.();
        }
      } catch (err) {
        if (h.clientGone()) {
          finish({ status: 499, cancelled: true });
          try {
            ctrl.close();
          } catch {
            // already cancelled by the client
          }
          return;
        }
        const ge = h.failure(err);
        finish({ status: ge.status, cancelled: false, error: ge, streaming: true });
        ctrl.enqueue(encoder.encode(errorFrame(ge.toBody())));
        ctrl.close();
      }
    },
    cancel() {
      finish({ status: 499, cancelled: true });
    },
  });
  return new Response(stream, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-request-id": id,
    },
  });
}
