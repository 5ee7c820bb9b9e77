/**
 * One Connect-protocol server-streaming call over Bun's fetch: the request
 * message in one envelope, the response read as envelopes straight off the
 * body reader. The gateway's hot path (Generate) uses this instead of
 * connect-node's HTTP/1.1 transport, which in Bun runs over the node:http
 * emulation and node streams and costs ~240 µs of CPU per streamed message on a
 * 2-core machine (this: ~120 µs, most of it fetch's own); at 64 streams that
 * was most of a core (docs/gateway-bench.md, "Against a model server").
 * Failures are thrown as ConnectError, exactly as the Connect transports do, so
 * `rpc-errors.ts` maps them once.
 *
 * @example
 * for await (const bytes of connectServerStream({ url, method: "dispatch.v1.ModelService/Generate", request, signal })) use(bytes);
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { codeFromHttpStatus, endStreamFromJson, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";

import { ttftMark } from "../telemetry/ttft-marks";
import { compressedMessageError, envelope, envelopeLength, FLAG_COMPRESSED, FLAG_END_STREAM, joinBytes, missingEndError } from "./connect-envelope";

export interface ServerStreamCall {
  /** The server's base URL, without a trailing slash. */
  url: string;
  /** `package.Service/Method`. */
  method: string;
  /** The serialized request message. */
  request: Uint8Array;
  signal: AbortSignal;
  headers?: Record<string, string>;
}

/** The messages of one call, as serialized bytes (views into the received chunks: use them before the next). */
export async function* connectServerStream(c: ServerStreamCall): AsyncGenerator<Uint8Array, void, undefined> {
  // Our own controller too, so a consumer that stops early (return()) closes the connection at once.
  const own = new AbortController();
  const signal = AbortSignal.any([c.signal, own.signal]);
  let ended = false;
  try {
    let res: Response;
    try {
      ttftMark("fetch");
      res = await fetch(`${c.url}/${c.method}`, {
        method: "POST",
        headers: { ...c.headers, "content-type": "application/connect+proto", "connect-protocol-version": "1" },
        body: envelope(c.request),
        signal,
      });
    } catch (err) {
      throw c.signal.aborted ? new ConnectError("The call was cancelled.", Code.Canceled, undefined, undefined, err) : new ConnectError(String((err as Error)?.message ?? err), Code.Unavailable, undefined, undefined, err);
    }
    ttftMark("headers");
    if (res.status !== 200 || !res.body) {
      const bytes = new Uint8Array(await res.arrayBuffer().catch(() => new ArrayBuffer(0)));
      throw errorFromJsonBytes(bytes, res.headers, new ConnectError(`HTTP ${res.status}`, codeFromHttpStatus(res.status)));
    }
    const reader = res.body.getReader();
    let buf: Uint8Array = new Uint8Array(0);
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (c.signal.aborted) throw new ConnectError("The call was cancelled.", Code.Canceled, undefined, undefined, err);
        throw new ConnectError(`The stream broke: ${String((err as Error)?.message ?? err)}`, Code.Unavailable, undefined, undefined, err);
      }
      if (chunk.done) break;
      buf = joinBytes(buf, chunk.value);
      let off = 0;
      for (let len = envelopeLength(buf, off); len >= 0; len = envelopeLength(buf, off)) {
        const flags = buf[off]!;
        const payload = buf.subarray(off + 5, off + 5 + len);
        off += 5 + len;
        if (flags & FLAG_COMPRESSED) throw compressedMessageError();
        if (flags & FLAG_END_STREAM) {
          ended = true;
          const end = endStreamFromJson(payload);
          if (end.error) throw end.error;
          return;
        }
        ttftMark("message");
        yield payload;
      }
      buf = off === buf.length ? new Uint8Array(0) : buf.subarray(off);
    }
    throw missingEndError();
  } finally {
    if (!ended) own.abort();
  }
}
