/**
 * The socket client's HTTP/1.1 framing against a raw loopback server: chunked
 * and Content-Length bodies split across TCP writes at every position (head,
 * chunk sizes, CRLFs, envelopes), byte-by-byte writes, and malformed
 * responses, which fail with a clear error and close the connection.
 */
import { describe, expect, test } from "bun:test";
import { Code } from "@connectrpc/connect";
import { CHUNKED_HEAD, okChunked, okLength, writeCut } from "../../test/raw-http1-server";
import { call, client, errorOf, REPLY, REPLY_TOKENS, server, tokens, until } from "../../test/socket-call-kit";

/** Serves `bytes` to each request in turn, cut at the positions `cutsFor(n)` gives for request n. */
function cutServer(bytes: Uint8Array, cutsFor: (n: number) => number[], gapMs = 1) {
  let n = 0;
  return server((c) => void writeCut(c.sock, bytes, cutsFor(n++), gapMs));
}

const body = Buffer.concat(REPLY.map((p) => Buffer.from(p)));
/** REPLY in chunks of `size` bytes, so chunk boundaries fall inside envelopes. */
function chunkedEvery(size: number): Buffer {
  const parts: Uint8Array[] = [];
  for (let i = 0; i < body.length; i += size) parts.push(body.subarray(i, i + size));
  return okChunked(parts);
}

describe("socket streams: framing", () => {
  for (const [name, bytes] of [
    ["chunked, one chunk per message", okChunked(REPLY)],
    ["chunked, 3-byte chunks", chunkedEvery(3)],
    ["Content-Length", okLength(REPLY)],
  ] as const) {
    test(`${name}: split in two at every position, then byte by byte; one connection throughout`, async () => {
      const srv = cutServer(bytes, (n) => (n < bytes.length - 1 ? [n + 1] : Array.from({ length: bytes.length - 1 }, (_, i) => i + 1)));
      const s = client(srv.url);
      for (let i = 1; i <= bytes.length; i++) {
        expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
        // The call ends at the end-of-stream message; the body's last bytes may still be on the way.
        expect(await until(() => s.idle === 1)).toBe(true);
      }
      expect(srv.heads.length).toBe(bytes.length);
      expect(srv.conns.length).toBe(1); // every response read to its end: the connection was kept each time
      expect(s.idle).toBe(1);
    });
  }

  test("a response that ends its connection (Connection: close) is read, and its connection is not pooled", async () => {
    const srv = server((c) => {
      c.sock.write(okLength(REPLY, "connection: close\r\n"));
      c.sock.end();
    });
    const s = client(srv.url);
    for (let i = 0; i < 3; i++) {
      expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
      expect(s.idle).toBe(0); // not even until its close arrives
    }
    expect(await until(() => srv.open === 0)).toBe(true);
    expect(srv.heads.length).toBe(3); // no retries were needed
  });

  test("a Connection: close response whose server keeps the socket open is not reused", async () => {
    const srv = server((c) => c.sock.write(okLength(REPLY, "connection: close\r\n")));
    const s = client(srv.url);
    for (let i = 0; i < 3; i++) expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
    expect(srv.conns.length).toBe(3);
    expect(s.idle).toBe(0);
    expect(await until(() => srv.open === 0)).toBe(true);
  });

  test("a body read until the close (no length, not chunked), after an interim 100: read whole, not pooled", async () => {
    const body = Buffer.concat(REPLY.map((p) => Buffer.from(p)));
    const srv = server((c) => {
      void writeCut(c.sock, Buffer.concat([Buffer.from("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/connect+proto\r\n\r\n"), body]), [10, 40, 90]).then(() => c.sock.end());
    });
    const s = client(srv.url);
    for (let i = 0; i < 2; i++) expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
    expect(await until(() => srv.open === 0 && s.idle === 0)).toBe(true);
    expect(srv.conns.length).toBe(2);
  });

  const malformed: [string, string, RegExp][] = [
    ["a status line that is not HTTP", "HTTQ/1.1 200 OK\r\n\r\n", /malformed HTTP response: status line/],
    ["a four-digit status", "HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n", /malformed HTTP response: status line/],
    ["a chunk size that is not hex", `${CHUNKED_HEAD}zz\r\n`, /malformed HTTP response: chunk size/],
    ["a chunk size with trailing junk", `${CHUNKED_HEAD}5zz\r\nhello\r\n0\r\n\r\n`, /malformed HTTP response: chunk size/],
    ["a chunk size with a 0x prefix", `${CHUNKED_HEAD}0x5\r\nhello\r\n0\r\n\r\n`, /malformed HTTP response: chunk size/],
    ["a chunk without its CRLF", `${CHUNKED_HEAD}2\r\nabXY`, /malformed HTTP response: chunk end/],
    ["an empty Content-Length", "HTTP/1.1 200 OK\r\ncontent-length: \r\n\r\n", /malformed HTTP response: content-length/],
    ["a Content-Length in hex", "HTTP/1.1 200 OK\r\ncontent-length: 0x10\r\n\r\n", /malformed HTTP response: content-length/],
    ["two different Content-Lengths", "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab", /malformed HTTP response: content-length/],
  ];
  for (const [name, text, why] of malformed) {
    test(`${name}: a clear error, the connection closed`, async () => {
      const srv = server((c) => c.sock.write(text));
      const s = client(srv.url);
      const err = await errorOf(tokens(call(s)));
      expect(err.code).toBe(Code.Unavailable);
      expect(err.rawMessage).toMatch(why);
      expect(await until(() => srv.open === 0)).toBe(true);
      expect(s.idle).toBe(0);
    });
  }
});
