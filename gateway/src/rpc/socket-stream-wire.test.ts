/**
 * The socket client against raw loopback servers (test/raw-http1-server.ts):
 * aborts while connecting and mid-stream, broken and malformed responses,
 * every packet split, keep-alive reuse and stale connections, many calls at
 * once, deadlines.
 */
import { describe, expect, test } from "bun:test";
import { Code } from "@connectrpc/connect";
import { okChunked } from "../../test/raw-http1-server";
import { call, client, errorOf, msg, REPLY, REPLY_TOKENS, server, tokens, until } from "../../test/socket-call-kit";

describe("socket streams on the wire", () => {
  test("an abort before the connect completes rejects at once; the socket that opens later is closed", async () => {
    const srv = server((c) => c.sock.write(okChunked(REPLY)));
    const s = client(srv.url);
    for (let i = 0; i < 20; i++) {
      const ctl = new AbortController();
      const t0 = performance.now();
      const p = call(s, ctl.signal).next();
      ctl.abort();
      const err = await errorOf(p);
      expect(err.code).toBe(Code.Canceled);
      expect(performance.now() - t0).toBeLessThan(100);
    }
    // Every connection the server saw (if the connect got that far) is closed again, with no request on it.
    // The connects went through after the aborts (the server accepted each); every one was closed.
    expect(await until(() => srv.conns.length === 20)).toBe(true);
    expect(await until(() => srv.open === 0)).toBe(true);
    expect(srv.heads.length).toBe(0);
    expect(s.idle).toBe(0);
    expect(await tokens(call(s))).toEqual(REPLY_TOKENS); // the client still works
  });

  test("an abort while the connect hangs (the server's accept queue is full) rejects at once", async () => {
    // A listener that never accepts, with its backlog filled by one connection: further connects hang in SYN-SENT.
    // Bun.listen and node:net accept at once, so the listener is a python3 process.
    const py = Bun.which("python3");
    if (!py) throw new Error("this test needs python3 for a listener that never accepts");
    const proc = Bun.spawn([py, "-c", "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(20)"], { stdout: "pipe" });
    try {
      const first = await proc.stdout.getReader().read();
      const port = Number(new TextDecoder().decode(first.value).trim());
      expect(port).toBeGreaterThan(0);
      const filler = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      const s = client(`http://127.0.0.1:${port}`);
      const ctl = new AbortController();
      const p = call(s, ctl.signal).next();
      const pending = await Promise.race([p.then(() => "settled", () => "settled"), Bun.sleep(100).then(() => "pending")]);
      expect(pending).toBe("pending"); // the connect really hangs
      const t0 = performance.now();
      ctl.abort();
      expect((await errorOf(p)).code).toBe(Code.Canceled);
      expect(performance.now() - t0).toBeLessThan(50);
      filler.terminate();
    } finally {
      proc.kill(); // the hanging connect now fails; its rejection is handled (no unhandled error)
      await proc.exited;
      await Bun.sleep(20);
    }
  });

  test("an abort mid-stream rejects the waiting read at once; the connection is closed, not pooled", async () => {
    const srv = server((c) => c.sock.write(Buffer.concat([Buffer.from(okChunked([msg(1)]).subarray(0, -5))]))); // one message, then silence
    const s = client(srv.url);
    const ctl = new AbortController();
    const it = call(s, ctl.signal);
    expect((await it.next()).done).toBe(false);
    const next = it.next();
    await Bun.sleep(10);
    const t0 = performance.now();
    ctl.abort();
    expect((await errorOf(next)).code).toBe(Code.Canceled);
    expect(performance.now() - t0).toBeLessThan(50);
    expect(await until(() => srv.open === 0)).toBe(true);
    expect(s.idle).toBe(0);
  });

  test("a deadline (AbortSignal.timeout) ends a call whose server never answers, and one that stalls mid-stream", async () => {
    let stallAfterHead = false;
    const srv = server((c) => (stallAfterHead ? c.sock.write(okChunked([msg(1)]).subarray(0, -5)) : undefined));
    const s = client(srv.url);
    let t0 = performance.now();
    expect((await errorOf(tokens(call(s, AbortSignal.timeout(50))))).code).toBe(Code.Canceled);
    expect(performance.now() - t0).toBeLessThan(500);
    stallAfterHead = true;
    t0 = performance.now();
    expect((await errorOf(tokens(call(s, AbortSignal.timeout(50))))).code).toBe(Code.Canceled);
    expect(performance.now() - t0).toBeLessThan(500);
    expect(await until(() => srv.open === 0)).toBe(true);
    expect(s.idle).toBe(0);
  });

  test("a server that closes mid-body fails the call with Unavailable, at once, not a hang", async () => {
    const whole = okChunked(REPLY);
    // Cut inside the head, in a chunk size line, inside a message, between chunks, before the last chunk.
    const head = whole.indexOf("\r\n\r\n") + 4;
    for (const at of [10, head + 1, head + 6, head + 12, whole.length - 20]) {
      const srv = server((c) => {
        c.sock.write(whole.subarray(0, at));
        c.sock.end();
      });
      const s = client(srv.url);
      const t0 = performance.now();
      const err = await errorOf(tokens(call(s)));
      expect(err.code).toBe(Code.Unavailable);
      expect(err.rawMessage).toMatch(/stream broke|ended without/);
      expect(performance.now() - t0).toBeLessThan(500);
      expect(srv.heads.length).toBe(1); // no retry: bytes of the response had come
      expect(s.idle).toBe(0);
    }
    // Cut after the end-of-stream message but before the body's last chunk: the call has all it needs
    // and succeeds; the connection is not kept.
    const srv = server((c) => {
      c.sock.write(whole.subarray(0, whole.length - 7));
      c.sock.end();
    });
    const s = client(srv.url);
    expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
    expect(await until(() => srv.open === 0)).toBe(true);
    expect(s.idle).toBe(0);
  });
});
