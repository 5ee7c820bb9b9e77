/**
 * Connect server-streaming calls over plain TCP sockets (Bun.connect) speaking
 * HTTP/1.1 ourselves, with keep-alive connections reused per server. The
 * gateway's Generate path: Bun's fetch runs its HTTP client on a thread of its
 * own, so a request and each response chunk cross threads (measured on the
 * 2-core box: ~80-90 us more to the first message than this, which runs on the
 * event loop's own sockets; docs/gateway-bench.md, 2026-11-30). It also has no
 * per-process cap on streams (fetch queues past BUN_CONFIG_MAX_HTTP_REQUESTS).
 *
 * Same contract as connect-stream.ts: the messages as serialized bytes (views
 * into received chunks), failures thrown as ConnectError with the codes the
 * Connect transports give. A consumer that stops early, or an aborted signal,
 * closes the connection (the server cancels its call); a connection is reused
 * only after its response was read to the end.
 *
 * A new connection that is not open within `connectTimeoutMs` (default 3000;
 * 0: none) fails its call with Unavailable, like a refused one, so the call is
 * retried on another server. The kernel's attempt itself cannot be cancelled
 * (Bun.connect hands out no socket before it opens, oven-sh/bun#33370): one
 * that opens later is closed at once, unused; one that never does ends when
 * the kernel gives up (net.ipv4.tcp_syn_retries: ~2 min by default).
 *
 * @example
 * const streams = createSocketStreams("http://127.0.0.1:9000");
 * for await (const bytes of streams.call({ method: "dispatch.v1.ModelService/Generate", request, signal })) use(bytes);
 */
import type { Socket, SocketHandler } from "bun";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeFromHttpStatus, endStreamFromJson, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { ttftMark } from "../telemetry/ttft-marks";
import { compressedMessageError, envelope, envelopeLength, FLAG_COMPRESSED, FLAG_END_STREAM, joinBytes, missingEndError } from "./connect-envelope";
import { type ResponseSink, createResponseParser, type ResponseParser } from "./http1-response";

export interface SocketCall {
  /** `package.Service/Method`. */
  method: string;
  /** The serialized request message. */
  request: Uint8Array;
  signal: AbortSignal;
  headers?: Record<string, string>;
}

export interface SocketStreams {
  call(c: SocketCall): AsyncGenerator<Uint8Array, void, undefined>;
  /** Connections kept open for reuse (tests). */
  readonly idle: number;
  /** Connects the kernel has not finished, those whose call gave up (timed out, aborted) included (tests). */
  readonly connecting: number;
  /** Closes the idle connections. */
  close(): void;
}

/** One connection; `sink` is the call reading its current response (null while idle). */
interface Conn {
  sock: Socket<Conn> | null;
  parser: ResponseParser | null;
  sink: CallState | null;
  pending: Uint8Array | null;
  dead: boolean;
  onDead: (() => void) | null;
}

/** One call's view of its response: messages queued for the consumer, its end or failure. */
class CallState implements ResponseSink {
  msgs: Uint8Array[] = [];
  head = 0;
  status = 0;
  headers: [string, string][] = [];
  errorBody: Uint8Array[] = [];
  buf: Uint8Array = new Uint8Array(0);
  /** The response was read to its end (the connection is free again). */
  complete = false;
  /** The end-of-stream message came. */
  ended = false;
  /** Bytes of the response arrived (a reused connection that closes before any did is retried once). */
  gotBytes = false;
  reused = false;
  retried = false;
  /** Called once the response was read to its end after the consumer finished. */
  onComplete: (() => void) | null = null;
  error: ConnectError | null = null;
  wake: (() => void) | null = null;

  constructor(private readonly signal: AbortSignal) {}

  private notify() {
    const w = this.wake;
    if (w) {
      this.wake = null;
      w();
    }
  }

  fail(err: ConnectError) {
    if (!this.error && !this.ended) this.error = err;
    this.notify();
  }

  onHead(status: number, headers: [string, string][]) {
    this.status = status;
    this.headers = headers;
  }

  onBody(bytes: Uint8Array) {
    if (this.status !== 200) {
      this.errorBody.push(bytes.slice());
      return;
    }
    if (this.ended || this.error) return;
    const buf = joinBytes(this.buf, bytes);
    let off = 0;
    let queued = false;
    for (let len = envelopeLength(buf, off); len >= 0; len = envelopeLength(buf, off)) {
      const flags = buf[off]!;
      const payload = buf.subarray(off + 5, off + 5 + len);
      off += 5 + len;
      if (flags & FLAG_COMPRESSED) {
        this.fail(compressedMessageError());
        return;
      }
      if (flags & FLAG_END_STREAM) {
        const end = endStreamFromJson(payload);
        if (end.error) this.fail(end.error);
        this.ended = true;
        this.notify();
        return;
      }
      this.msgs.push(payload);
      queued = true;
    }
    this.buf = off === buf.length ? new Uint8Array(0) : buf.subarray(off);
    if (queued) {
      ttftMark("message");
      this.notify();
    }
  }

  onEnd() {
    this.complete = true;
    if (this.onComplete) return this.onComplete();
    if (this.status !== 200) {
      const total = this.errorBody.reduce((n, b) => n + b.length, 0);
      const bytes = new Uint8Array(total);
      let o = 0;
      for (const b of this.errorBody) bytes.set(b, (o += b.length) - b.length);
      const fallback = new ConnectError(`HTTP ${this.status}`, codeFromHttpStatus(this.status));
      let err: ConnectError;
      try {
        err = errorFromJsonBytes(bytes, new Headers(this.headers), fallback);
      } catch (e) {
        err = e instanceof ConnectError ? e : fallback; // a body that is not a Connect error throws the fallback
      }
      this.fail(err);
    } else if (!this.ended) this.fail(missingEndError());
    this.notify();
  }

  /** The connection closed or broke before the response ended. */
  onBroken(cause: unknown) {
    if (this.complete) return;
    const msg = cause ? String((cause as Error)?.message ?? cause) : "the connection closed";
    this.fail(this.signal.aborted ? new ConnectError("The call was cancelled.", Code.Canceled, undefined, undefined, cause) : new ConnectError(`The stream broke: ${msg}`, Code.Unavailable, undefined, undefined, cause));
  }
}

const handlers: SocketHandler<Conn> = {
  data(s, d) {
    const c = s.data;
    if (!c.parser) {
      s.terminate(); // bytes while idle: the connection is out of step, never reuse it
      return;
    }
    if (c.sink) c.sink.gotBytes = true;
    try {
      if (!c.parser.push(d)) s.terminate();
    } catch (err) {
      c.sink?.fail(new ConnectError(`Reading the response failed: ${String((err as Error)?.message ?? err)}`, Code.Internal, undefined, undefined, err));
      s.terminate();
    }
  },
  drain(s) {
    const c = s.data;
    const p = c.pending;
    if (!p) return;
    const n = s.write(p);
    c.pending = n >= p.length ? null : n > 0 ? p.subarray(n) : p;
  },
  end(s) {
    s.data.parser?.close(); // a body read until the close ends here
    s.end();
  },
  close(s, err) {
    const c = s.data;
    c.dead = true;
    c.sink?.onBroken(err);
    c.onDead?.();
  },
  error(s, err) {
    s.data.sink?.onBroken(err);
  },
};

/** A new connection did not open in time (its call fails with Unavailable, retried elsewhere like a refused one). */
export class ConnectTimeoutError extends Error {
  override readonly name = "ConnectTimeoutError";
  constructor(host: string, port: number, ms: number) {
    super(`connecting to ${host.includes(":") ? `[${host}]` : host}:${port} timed out after ${ms} ms`);
  }
}

/** Header names and values that would break the request head (CR, LF, or a name with a colon or space). */
const BAD_NAME = /[\r\n:\s]/;
const BAD_VALUE = /[\r\n]/;

export interface SocketStreamsOptions {
  /** Idle connections kept for reuse (default 128). */
  maxIdle?: number;
  /** Bound on opening a new connection, in ms (default 3000; 0: none). Pooled connections cost no timer. */
  connectTimeoutMs?: number;
}

export function createSocketStreams(baseUrl: string, o: SocketStreamsOptions = {}): SocketStreams {
  const u = new URL(baseUrl);
  if (u.protocol !== "http:") throw new Error(`socket streams speak plain http only, not ${u.protocol}`);
  const hostname = u.hostname.replace(/^\[|\]$/g, "");
  const port = Number(u.port || 80);
  const prefix = u.pathname.replace(/\/+$/, "");
  const hostHeader = `host: ${u.host}\r\ncontent-type: application/connect+proto\r\nconnect-protocol-version: 1\r\n`;
  const maxIdle = o.maxIdle ?? 128;
  const connectTimeoutMs = o.connectTimeoutMs ?? 3000;
  if (!Number.isInteger(connectTimeoutMs) || connectTimeoutMs < 0) throw new Error(`connectTimeoutMs must be an integer >= 0, got ${connectTimeoutMs}`);
  const idle: Conn[] = [];
  let connecting = 0;

  /**
   * A new connection. An abort, or `connectTimeoutMs` passing, rejects at once; the socket, if it still
   * opens, is closed unused.
   */
  function connect(signal: AbortSignal): Promise<Conn> {
    const conn: Conn = { sock: null, parser: null, sink: null, pending: null, dead: false, onDead: null };
    connecting++;
    const opening = Bun.connect<Conn>({ hostname, port, data: conn, socket: handlers }).then(
      (sock) => {
        connecting--;
        conn.sock = sock;
        sock.setNoDelay?.(true);
        return conn;
      },
      (err) => {
        connecting--;
        throw err;
      },
    );
    return new Promise<Conn>((resolve, reject) => {
      let settled = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const settle = () => {
        settled = true;
        signal.removeEventListener("abort", onAbort);
        if (timer !== undefined) clearTimeout(timer);
      };
      const giveUp = (err: Error) => {
        if (settled) return;
        settle();
        reject(err); // the socket, if it opens later, is closed below
      };
      const onAbort = () => giveUp(new Error("aborted while connecting"));
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
      if (connectTimeoutMs > 0 && !settled) timer = setTimeout(() => giveUp(new ConnectTimeoutError(hostname, port, connectTimeoutMs)), connectTimeoutMs);
      opening.then(
        (cn) => (settled ? cn.sock?.terminate() : (settle(), resolve(cn))),
        (err) => settled || (settle(), reject(err)),
      );
    });
  }

  function release(conn: Conn) {
    conn.parser = null;
    conn.sink = null;
    if (conn.dead || !conn.sock) return;
    if (conn.pending) {
      conn.sock.terminate(); // the response ended before the request was all written: never reuse it
      return;
    }
    if (idle.length >= maxIdle) {
      conn.sock.end();
      return;
    }
    conn.sock.unref();
    conn.onDead = () => {
      const i = idle.indexOf(conn);
      if (i >= 0) idle.splice(i, 1);
    };
    idle.push(conn);
  }

  function requestBytes(c: SocketCall): Uint8Array {
    let head = `POST ${prefix}/${c.method} HTTP/1.1\r\n${hostHeader}content-length: ${c.request.length + 5}\r\n`;
    if (c.headers) {
      for (const k in c.headers) {
        const v = c.headers[k]!;
        if (BAD_NAME.test(k) || BAD_VALUE.test(v)) throw new ConnectError(`Header '${k}' holds characters not allowed in HTTP/1.1.`, Code.Internal);
        head += `${k}: ${v}\r\n`;
      }
    }
    head += "\r\n";
    return envelope(c.request, Buffer.from(head, "latin1"));
  }

  /** A connection with `st` reading its response, the request written (or failing). */
  async function start(c: SocketCall, bytes: Uint8Array, st: CallState, fresh: boolean): Promise<Conn> {
    let conn = fresh ? undefined : idle.pop();
    if (!conn) {
      try {
        conn = await connect(c.signal);
      } catch (err) {
        throw c.signal.aborted ? new ConnectError("The call was cancelled.", Code.Canceled, undefined, undefined, err) : new ConnectError(String((err as Error)?.message ?? err), Code.Unavailable, undefined, undefined, err);
      }
    } else st.reused = true;
    conn.onDead = null;
    conn.sink = st;
    conn.parser = createResponseParser(st);
    const sock = conn.sock!;
    sock.ref();
    ttftMark("fetch");
    const n = conn.dead ? -1 : sock.write(bytes);
    if (n < 0) {
      st.onBroken(new Error("the connection closed"));
      if (!conn.dead) sock.terminate();
    } else if (n < bytes.length) conn.pending = bytes.subarray(n);
    return conn;
  }

  async function* call(c: SocketCall): AsyncGenerator<Uint8Array, void, undefined> {
    const { signal } = c;
    if (signal.aborted) throw new ConnectError("The call was cancelled.", Code.Canceled);
    const bytes = requestBytes(c);
    let st = new CallState(signal);
    let conn: Conn | null = null;
    const onAbort = () => {
      st.fail(new ConnectError("The call was cancelled.", Code.Canceled));
      if (conn && !conn.dead) conn.sock?.terminate();
    };
    signal.addEventListener("abort", onAbort, { once: true });
    let done = false;
    try {
      conn = await start(c, bytes, st, false);
      for (;;) {
        if (st.head < st.msgs.length) {
          const m = st.msgs[st.head]!;
          st.msgs[st.head++] = EMPTY;
          yield m;
          continue;
        }
        st.msgs.length = 0;
        st.head = 0;
        if (st.error) {
          // A kept-alive connection the server closed while idle fails before any byte: once more on a new one.
          if (st.reused && !st.gotBytes && !st.retried && !signal.aborted) {
            conn.sink = null;
            conn.parser = null;
            st = new CallState(signal);
            st.retried = true;
            conn = await start(c, bytes, st, true);
            continue;
          }
          throw st.error;
        }
        if (st.ended) {
          done = true;
          return;
        }
        await new Promise<void>((resolve) => (st.wake = resolve));
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      const cn = conn; // null: connecting failed
      // A consumer that stops after the last message (its finish) found the call ended already: nothing to
      // cancel, the connection stays. The end-of-stream message may come before the response's last bytes.
      if (cn && (done || st.ended)) {
        if (st.complete) release(cn);
        else st.onComplete = () => release(cn);
      } else if (cn) {
        cn.sink = null;
        cn.parser = null;
        if (!cn.dead) cn.sock?.terminate();
      }
    }
  }

  return {
    call,
    get idle() {
      return idle.length;
    },
    get connecting() {
      return connecting;
    },
    close() {
      for (const c of idle.splice(0)) c.sock?.end();
    },
  };
}

const EMPTY = new Uint8Array(0);
