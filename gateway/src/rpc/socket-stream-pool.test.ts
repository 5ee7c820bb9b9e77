/**
 * The socket client's keep-alive pool against a raw loopback server: reuse
 * after a completed response, a kept connection the server closed while idle
 * or closes when reused (retried once on a new connection, never twice), many
 * calls at once with the pool bounded, and a request not fully written when
 * its response ended (never pooled).
 */
import { describe, expect, test } from "bun:test";
import { Code } from "@connectrpc/connect";
import { okChunked } from "../../test/raw-http1-server";
import { call, client, errorOf, REPLY, REPLY_TOKENS, server, tokens, until } from "../../test/socket-call-kit";

describe("socket streams: keep-alive pool", () => {
  test("sequential calls reuse one connection", async () => {
    const srv = server((c) => c.sock.write(okChunked(REPLY)));
    const s = client(srv.url);
    for (let i = 0; i < 5; i++) {
      expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
      expect(await until(() => s.idle === 1)).toBe(true);
    }
    expect(srv.heads.length).toBe(5);
    expect(srv.conns.length).toBe(1);
  });

  test("a kept connection the server closes while idle leaves the pool; the next call opens a new one", async () => {
    const srv = server((c) => {
      c.sock.write(okChunked(REPLY));
      setTimeout(() => c.sock.end(), 5);
    });
    const s = client(srv.url);
    expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
    expect(await until(() => srv.open === 0 && s.idle === 0)).toBe(true);
    expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
    expect(srv.conns.length).toBe(2);
    expect(srv.heads.length).toBe(2);
  });

  for (const how of ["end", "terminate"] as const) {
    test(`a kept connection the server closes (${how}) when reused, before any byte, is retried once on a new one`, async () => {
      const srv = server((c) => (c.requests === 1 ? c.sock.write(okChunked(REPLY)) : c.sock[how]()));
      const s = client(srv.url);
      expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
      expect(await until(() => s.idle === 1)).toBe(true);
      expect(await tokens(call(s))).toEqual(REPLY_TOKENS); // no error: the retry answered
      expect(srv.heads.length).toBe(3); // first, the one the kept connection dropped, the retry
      expect(srv.conns.length).toBe(2);
    });
  }

  test("the retry happens once: a new connection that also closes before any byte fails the call with Unavailable", async () => {
    let answered = 0;
    const srv = server((c) => (answered++ === 0 ? c.sock.write(okChunked(REPLY)) : c.sock.end()));
    const s = client(srv.url);
    expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
    expect(await until(() => s.idle === 1)).toBe(true);
    const err = await errorOf(tokens(call(s)));
    expect(err.code).toBe(Code.Unavailable);
    expect(srv.heads.length).toBe(3);
    expect(srv.conns.length).toBe(2);
    expect(s.idle).toBe(0);
    // A fresh connection (nothing pooled) that closes before any byte is not retried.
    expect((await errorOf(tokens(call(s)))).code).toBe(Code.Unavailable);
    expect(srv.heads.length).toBe(4);
  });

  test("50 calls at once all complete; a second round reuses the same connections; the pool stays within maxIdle", async () => {
    const srv = server((c) => setTimeout(() => c.sock.write(okChunked(REPLY)), 5));
    const s = client(srv.url);
    for (let round = 0; round < 2; round++) {
      const all = await Promise.all(Array.from({ length: 50 }, () => tokens(call(s))));
      expect(all.every((t) => t.join() === REPLY_TOKENS.join())).toBe(true);
      expect(await until(() => s.idle === 50)).toBe(true);
    }
    expect(srv.conns.length).toBe(50);
    expect(srv.heads.length).toBe(100);

    const small = client(srv.url, { maxIdle: 8 });
    const all = await Promise.all(Array.from({ length: 50 }, () => tokens(call(small))));
    expect(all.every((t) => t.join() === REPLY_TOKENS.join())).toBe(true);
    expect(await until(() => srv.open === 50 + 8)).toBe(true); // the 42 past maxIdle were closed
    expect(small.idle).toBe(8);
  });

  test("a response that ends before its request was fully written: the connection is not pooled", async () => {
    // 32 MiB of request against a server that answers at the head and stops reading: the write is partial.
    const big = new Uint8Array(32 << 20);
    const srv = server(() => {}, {
      onOpen: (c) => {
        c.sock.pause();
        c.sock.write(okChunked(REPLY));
      },
    });
    const s = client(srv.url);
    expect(await tokens(call(s, AbortSignal.timeout(5000), big))).toEqual(REPLY_TOKENS);
    await Bun.sleep(20);
    expect(s.idle).toBe(0);
    expect(await until(() => srv.open === 0)).toBe(true);
  });
});
