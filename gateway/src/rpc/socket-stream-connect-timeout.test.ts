/**
 * The socket client's connect timeout against real loopback listeners: one
 * whose connects hang in SYN-SENT (test/hanging-listener.ts) and a raw server
 * that answers slowly (the bound covers the connect, never the response).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { Code } from "@connectrpc/connect";
import { okChunked } from "../../test/raw-http1-server";
import { startHangingListener, type HangingListener } from "../../test/hanging-listener";
import { call, errorOf, REPLY, REPLY_TOKENS, server, tokens, until } from "../../test/socket-call-kit";
import { createSocketStreams, type SocketStreams, type SocketStreamsOptions } from "./socket-stream";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});
function client(url: string, o: SocketStreamsOptions): SocketStreams {
  const s = createSocketStreams(url, o);
  cleanup.push(() => s.close());
  return s;
}
async function hanging(): Promise<HangingListener> {
  const h = await startHangingListener();
  cleanup.push(() => h.stop());
  return h;
}

describe("socket streams: connect timeout", () => {
  test("a connect that hangs fails with Unavailable within the bound, naming the address; a socket that opens later is closed unused", async () => {
    const h = await hanging();
    const s = client(`http://127.0.0.1:${h.port}`, { connectTimeoutMs: 150 });
    const t0 = performance.now();
    const err = await errorOf(call(s).next());
    const took = performance.now() - t0;
    expect(err.code).toBe(Code.Unavailable);
    expect(err.rawMessage).toBe(`connecting to 127.0.0.1:${h.port} timed out after 150 ms`);
    expect(took).toBeGreaterThanOrEqual(145);
    expect(took).toBeLessThan(400);
    // The kernel's attempt is still there (Bun.connect cannot cancel it); nothing was pooled.
    expect(s.connecting).toBe(1);
    expect(await h.synSent()).toBe(1);
    expect(s.idle).toBe(0);
    // Once the listener accepts, the attempt completes at its next SYN retransmit (~1 s) and is closed
    // at once without a byte written.
    h.acceptAll();
    expect(await until(() => h.closed.length === 1, 5000)).toBe(true);
    expect(h.closed).toEqual([0]);
    expect(s.connecting).toBe(0);
    expect(await h.synSent()).toBe(0);
    expect(s.idle).toBe(0);
  }, 10_000);

  test("calls at once each time out; once the listener is gone no connect is left", async () => {
    const h = await hanging();
    const s = client(`http://127.0.0.1:${h.port}`, { connectTimeoutMs: 100 });
    const t0 = performance.now();
    const errs = await Promise.all(Array.from({ length: 5 }, () => errorOf(call(s).next())));
    expect(performance.now() - t0).toBeLessThan(350);
    expect(errs.map((e) => e.code)).toEqual(Array(5).fill(Code.Unavailable));
    expect(s.connecting).toBe(5);
    expect(await h.synSent()).toBe(5);
    await h.stop(); // the next SYN retransmits are refused: every attempt fails, its rejection handled
    expect(await until(() => s.connecting === 0, 5000)).toBe(true);
    expect(await h.synSent()).toBe(0);
  }, 10_000);

  test("connectTimeoutMs 0: no bound (the connect still hangs past any short timeout) until the call is aborted", async () => {
    const h = await hanging();
    const s = client(`http://127.0.0.1:${h.port}`, { connectTimeoutMs: 0 });
    const ctl = new AbortController();
    const p = call(s, ctl.signal).next();
    const state = await Promise.race([p.then(() => "settled", () => "settled"), Bun.sleep(300).then(() => "pending")]);
    expect(state).toBe("pending");
    ctl.abort();
    expect((await errorOf(p)).code).toBe(Code.Canceled);
  });

  test("the bound covers the connect only: a response slower than it is read, and the kept connection serves the next call", async () => {
    const srv = server((c) => void setTimeout(() => c.sock.write(okChunked(REPLY)), 120));
    const s = client(srv.url, { connectTimeoutMs: 40 });
    for (let i = 0; i < 3; i++) expect(await tokens(call(s))).toEqual(REPLY_TOKENS);
    expect(srv.conns.length).toBe(1);
    expect(s.idle).toBe(1);
    expect(s.connecting).toBe(0);
  });

  test("a bad connectTimeoutMs is refused", () => {
    expect(() => createSocketStreams("http://127.0.0.1:1", { connectTimeoutMs: -1 })).toThrow("connectTimeoutMs must be an integer >= 0, got -1");
    expect(() => createSocketStreams("http://127.0.0.1:1", { connectTimeoutMs: 1.5 })).toThrow("connectTimeoutMs must be an integer >= 0, got 1.5");
  });
});
