/**
 * Streams a started call to the client as SSE. Frames come ready-made from
 * the call; a failure after the first byte becomes one final
 * `data: {"error":{...}}` event and a clean close; a client that goes away
 * cancels the stream, which aborts the upstream call.
 */
import type { GatewayError } from "../errors";
import { errorFrame } from "../openai/chunks";
import { ttftEnd, ttftMark } from "../telemetry/ttft-marks";
import type { Call } from "../workers/backend";

export interface Outcome {
  status: number;
  cancelled: boolean;
  error?: GatewayError;
  /** The failure came after the response began streaming (no error response will log it). */
  streaming?: boolean;
}

export interface StreamHooks {
  /** The client went away (its request signal aborted). */
  clientGone(): boolean;
  /** The GatewayError to report for a failure (a passed deadline becomes a 504). */
  failure(err: unknown): GatewayError;
  finish(o: Outcome): void;
  /** One output went to the client (telemetry: first token, inter-token latency). */
  onChunk?(): void;
  /** The last frame of a stream that failed after its first byte (default: chat's `data: {"error": ...}`). */
  errorFrame?(err: GatewayError): string;
}

export function sseResponse(call: Call, id: string, h: StreamHooks): Response {
  const finish = h.finish;
  // A direct stream: frames go to the socket as they come (strings, no encode, no queue or
  // pull round trip per chunk). The client going away aborts the request signal, which
  // aborts the upstream call, so call.next() throws and the loop ends.
  const stream = new ReadableStream<Uint8Array>({
    type: "direct",
    async pull(ctrl: ReadableStreamDirectController) {
      ttftMark("pull");
      try {
        const first = call.ready?.();
        if (first) {
          const w = ctrl.write(first);
          const f = ctrl.flush();
          if (typeof w !== "number") await w;
          else if (typeof f !== "number") await f;
          ttftEnd("written");
          h.onChunk?.();
        }
        for (;;) {
          const out = await call.next();
          if (out === null) {
            finish({ status: 200, cancelled: false });
            break;
          }
          const w = ctrl.write(out);
          const f = ctrl.flush();
          if (typeof w !== "number") await w; // backpressure: the client reads slower than we write
          else if (typeof f !== "number") await f;
          ttftEnd("written");
          h.onChunk?.();
        }
      } catch (err) {
        if (h.clientGone()) {
          finish({ status: 499, cancelled: true });
          return;
        }
        const ge = h.failure(err);
        finish({ status: ge.status, cancelled: false, error: ge, streaming: true });
        ctrl.write(h.errorFrame ? h.errorFrame(ge) : errorFrame(ge.toBody()));
      }
      ctrl.close();
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
