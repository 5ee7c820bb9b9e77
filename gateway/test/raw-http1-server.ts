/**
 * A raw HTTP/1.1 server on a loopback socket (Bun.listen, random port) for the
 * socket client's tests: it reads each request (head and content-length body),
 * hands it to `onRequest` with the connection, and counts the connections it
 * accepted and saw close. Responses are written by the test, byte for byte, so
 * framing, splits and closes are exactly what the test says.
 *
 * @example
 * const srv = startRawServer((c) => c.sock.write(okChunked([msg(65, 1), endStream()])));
 */
import type { Socket } from "bun";

export interface RawConn {
  id: number;
  sock: Socket<RawConn>;
  /** Requests read on this connection. */
  requests: number;
  closed: boolean;
  buf: Buffer;
}

export interface RawRequest {
  head: string;
  body: Uint8Array;
}

export interface RawServer {
  url: string;
  port: number;
  conns: RawConn[];
  /** Every request head read, in order. */
  heads: string[];
  readonly open: number;
  stop(): void;
}

export function startRawServer(onRequest: (c: RawConn, r: RawRequest) => void, o: { onOpen?: (c: RawConn) => void } = {}): RawServer {
  const conns: RawConn[] = [];
  const heads: string[] = [];
  const srv = Bun.listen<RawConn>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(sock) {
        const c: RawConn = { id: conns.length, sock, requests: 0, closed: false, buf: Buffer.alloc(0) };
        sock.data = c;
        sock.setNoDelay(true);
        conns.push(c);
        o.onOpen?.(c);
      },
      data(sock, d) {
        const c = sock.data;
        c.buf = Buffer.concat([c.buf, d]);
        for (let k = 0; k < 1000; k++) {
          const at = c.buf.indexOf("\r\n\r\n");
          if (at < 0) return;
          const head = c.buf.subarray(0, at).toString("latin1");
          const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
          if (c.buf.length < at + 4 + len) return;
          const body = new Uint8Array(c.buf.subarray(at + 4, at + 4 + len));
          c.buf = c.buf.subarray(at + 4 + len);
          c.requests++;
          heads.push(head);
          onRequest(c, { head, body });
        }
      },
      close(sock) {
        sock.data.closed = true;
      },
    },
  });
  return {
    url: `http://127.0.0.1:${srv.port}`,
    port: srv.port,
    conns,
    heads,
    get open() {
      return conns.filter((c) => !c.closed).length;
    },
    stop: () => srv.stop(true),
  };
}

/** One Connect envelope. */
export function envelope(flags: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, 5);
  return out;
}

/** The end-of-stream envelope, `{}` or with an error. */
export function endStream(error?: { code: string; message: string }): Uint8Array {
  return envelope(2, new TextEncoder().encode(JSON.stringify(error ? { error } : {})));
}

/** A 200 Connect streaming head for a chunked body. */
export const CHUNKED_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: application/connect+proto\r\ntransfer-encoding: chunked\r\n\r\n";

/** `body` as a chunked 200 response, one chunk per part. */
export function okChunked(parts: Uint8Array[]): Buffer {
  const out: Buffer[] = [Buffer.from(CHUNKED_HEAD)];
  for (const p of parts) out.push(Buffer.from(`${p.length.toString(16)}\r\n`), Buffer.from(p), Buffer.from("\r\n"));
  out.push(Buffer.from("0\r\n\r\n"));
  return Buffer.concat(out);
}

/** `parts` as a 200 response with a Content-Length body. */
export function okLength(parts: Uint8Array[], extraHeaders = ""): Buffer {
  const body = Buffer.concat(parts.map((p) => Buffer.from(p)));
  return Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-type: application/connect+proto\r\ncontent-length: ${body.length}\r\n${extraHeaders}\r\n`), body]);
}

/** Writes `bytes` in pieces cut at `cuts` (sorted offsets), `gapMs` apart; resolves when all are written. */
export async function writeCut(sock: Socket<RawConn>, bytes: Uint8Array, cuts: number[], gapMs = 1): Promise<void> {
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut > at) sock.write(bytes.subarray(at, cut));
    at = cut;
    if (at < bytes.length) await Bun.sleep(gapMs);
  }
}
