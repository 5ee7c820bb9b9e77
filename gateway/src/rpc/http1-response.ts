/**
 * An incremental HTTP/1.1 response reader for socket-stream.ts: bytes in as
 * they arrive off the socket, the status and headers, the body's bytes (chunked,
 * Content-Length or until the close) and its end out to a sink. Interim 1xx
 * responses are skipped; trailers are read and dropped. Malformed input fails
 * the sink; the caller then closes the connection.
 *
 * @example
 * const p = createResponseParser({ onHead, onBody, onEnd, onBroken });
 * p.push(bytesFromSocket); // any split
 */

import { joinBytes } from "./connect-envelope";

export interface ResponseSink {
  onHead(status: number, headers: [string, string][]): void;
  /** Body bytes (a view: copy to keep past the call). */
  onBody(bytes: Uint8Array): void;
  /** The response was read to its end. */
  onEnd(): void;
  /** Malformed or cut short. */
  onBroken(cause: unknown): void;
}

export interface ResponseParser {
  /** False when the connection must not be reused (malformed, bytes past the response's end, or a response that ended with `Connection: close` or HTTP/1.0 without keep-alive). */
  push(bytes: Uint8Array): boolean;
  /** The server closed its side (a body read until the close ends here). */
  close(): void;
}

const enum State {
  Head,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  Length,
  UntilClose,
  Done,
}

const MAX_HEAD = 64 * 1024;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: |$)/;
/** Decimal digits only: Number() would take "", " ", "0x10" and "1e3". */
const CONTENT_LENGTH = /^\d{1,15}$/;
/** Hex digits, optional trailing whitespace (parseInt would take "5zz" as 5 and "0x5"). */
const CHUNK_SIZE = /^[0-9a-fA-F]{1,12}[ \t]*$/;
const latin1 = new TextDecoder("latin1");

/** Index of "\r\n" at or after `from`, or -1. */
function lineEnd(b: Uint8Array, from: number): number {
  for (let i = b.indexOf(10, from); i >= 0; i = b.indexOf(10, i + 1)) if (i - 1 >= from && b[i - 1] === 13) return i - 1;
  return -1;
}

/** Index of "\r\n\r\n" at or after `from`, or -1. */
function headEnd(b: Uint8Array, from: number): number {
  for (let i = b.indexOf(10, from); i >= 0; i = b.indexOf(10, i + 1)) {
    if (i - 3 >= from && b[i - 1] === 13 && b[i - 2] === 10 && b[i - 3] === 13) return i - 3;
  }
  return -1;
}

export function createResponseParser(sink: ResponseSink): ResponseParser {
  let state = State.Head;
  let left = 0; // bytes of the current chunk or of the Content-Length body still to come
  let rest: Uint8Array | null = null; // bytes of an incomplete line or head
  let reusable = true; // the connection may carry another request after this response

  function fail(why: string): false {
    state = State.Done;
    sink.onBroken(new Error(`malformed HTTP response: ${why}`));
    return false;
  }

  function end(): void {
    state = State.Done;
    sink.onEnd();
  }

  /** Parses the head in b[0..at); false when it failed. */
  function head(b: Uint8Array, at: number): boolean {
    const lines = latin1.decode(b.subarray(0, at)).split("\r\n");
    const m = STATUS_LINE.exec(lines[0]!);
    if (!m) return fail("status line");
    const status = Number(m[2]);
    if (status >= 100 && status < 200) return true; // interim: the real head follows
    const headers: [string, string][] = [];
    let chunked = false;
    let length = -1;
    let connection = "";
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const c = line.indexOf(":");
      if (c <= 0) return fail("header line");
      const name = line.slice(0, c).trim().toLowerCase();
      const value = line.slice(c + 1).trim();
      headers.push([name, value]);
      if (name === "transfer-encoding") chunked = value.toLowerCase().includes("chunked");
      else if (name === "content-length") {
        if (!CONTENT_LENGTH.test(value) || (length >= 0 && length !== Number(value))) return fail("content-length");
        length = Number(value);
      } else if (name === "connection") connection += `${value.toLowerCase()},`;
    }
    reusable = m[1] === "1" ? !connection.includes("close") : connection.includes("keep-alive");
    sink.onHead(status, headers);
    if (status === 204 || status === 304) end();
    else if (chunked) state = State.ChunkSize;
    else if (length >= 0) {
      left = length;
      state = State.Length;
      if (left === 0) end();
    } else state = State.UntilClose;
    return true;
  }

  function push(bytes: Uint8Array): boolean {
    if (state === (State.Done as State)) return bytes.length === 0;
    let b = bytes;
    if (rest) {
      b = joinBytes(rest, bytes);
      rest = null;
    }
    let off = 0;
    while (off < b.length && state !== State.Done) {
      switch (state) {
        case State.Head: {
          const at = headEnd(b, off);
          if (at < 0) {
            if (b.length - off > MAX_HEAD) return fail("head too large");
            rest = b.subarray(off);
            return true;
          }
          const h = b.subarray(off, at);
          off = at + 4;
          if (!head(h, h.length)) return false;
          break;
        }
        case State.ChunkSize: {
          const at = lineEnd(b, off);
          if (at < 0) {
            if (b.length - off > 1024) return fail("chunk size line");
            rest = b.subarray(off);
            return true;
          }
          const line = latin1.decode(b.subarray(off, at));
          const semi = line.indexOf(";");
          const digits = semi >= 0 ? line.slice(0, semi) : line;
          if (!CHUNK_SIZE.test(digits)) return fail("chunk size");
          const size = Number.parseInt(digits, 16);
          off = at + 2;
          if (size === 0) state = State.Trailers;
          else {
            left = size;
            state = State.ChunkData;
          }
          break;
        }
        case State.ChunkData: {
          const n = Math.min(left, b.length - off);
          sink.onBody(b.subarray(off, off + n));
          off += n;
          left -= n;
          if (left === 0) state = State.ChunkEnd;
          break;
        }
        case State.ChunkEnd: {
          if (b.length - off < 2) {
            rest = b.subarray(off);
            return true;
          }
          if (b[off] !== 13 || b[off + 1] !== 10) return fail("chunk end");
          off += 2;
          state = State.ChunkSize;
          break;
        }
        case State.Trailers: {
          const at = lineEnd(b, off);
          if (at < 0) {
            if (b.length - off > MAX_HEAD) return fail("trailers too large");
            rest = b.subarray(off);
            return true;
          }
          const empty = at === off;
          off = at + 2;
          if (empty) end();
          break;
        }
        case State.Length: {
          const n = Math.min(left, b.length - off);
          sink.onBody(b.subarray(off, off + n));
          off += n;
          left -= n;
          if (left === 0) end();
          break;
        }
        case State.UntilClose:
          sink.onBody(b.subarray(off));
          off = b.length;
          break;
      }
    }
    return off >= b.length && (reusable || state !== State.Done);
  }

  return {
    push,
    close() {
      if (state === State.UntilClose) end();
    },
  };
}
