import { describe, expect, test } from "bun:test";
import { createResponseParser, type ResponseSink } from "./http1-response";

function collect() {
  const r = { status: 0, headers: [] as [string, string][], body: "", ended: 0, broken: [] as string[] };
  const sink: ResponseSink = {
    onHead: (s, h) => ((r.status = s), (r.headers = h)),
    onBody: (b) => (r.body += Buffer.from(b).toString("latin1")),
    onEnd: () => r.ended++,
    onBroken: (e) => r.broken.push(String((e as Error).message)),
  };
  return { r, parser: createResponseParser(sink) };
}

const enc = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));

/** Feeds `text` cut at every position in `cuts` (sorted). */
function feed(text: string, cuts: number[]) {
  const c = collect();
  let ok = true;
  let at = 0;
  for (const cut of [...cuts, text.length]) {
    ok = c.parser.push(enc(text.slice(at, cut))) && ok;
    at = cut;
  }
  return { ...c.r, ok };
}

const CHUNKED = "HTTP/1.1 200 OK\r\nContent-Type: application/connect+proto\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n";

describe("createResponseParser", () => {
  test("a chunked body, split at every single position and at random positions, reads the same", () => {
    const whole = feed(CHUNKED, []);
    expect(whole).toEqual({ status: 200, headers: [["content-type", "application/connect+proto"], ["transfer-encoding", "chunked"]], body: "helloabcdefghijklmnopqrstuvwxyz", ended: 1, broken: [], ok: true });
    for (let i = 1; i < CHUNKED.length; i++) expect(feed(CHUNKED, [i])).toEqual(whole);
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    for (let k = 0; k < 200; k++) {
      const cuts = Array.from({ length: 1 + Math.floor(rand() * 8) }, () => Math.floor(rand() * CHUNKED.length)).sort((a, b) => a - b);
      expect(feed(CHUNKED, cuts)).toEqual(whole);
    }
  });

  test("Content-Length, an interim 100, a body until the close", () => {
    const r = feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: 11\r\n\r\n{\"code\":1}\n", [30]);
    expect([r.status, r.body, r.ended, r.ok]).toEqual([404, '{"code":1}\n', 1, true]);
    const c = collect();
    c.parser.push(enc("HTTP/1.0 200 OK\r\n\r\nsome"));
    c.parser.push(enc(" bytes"));
    expect(c.r.ended).toBe(0);
    c.parser.close();
    expect([c.r.body, c.r.ended]).toEqual(["some bytes", 1]);
  });

  test("malformed input breaks the response; bytes past its end say the connection is not reusable", () => {
    expect(feed("HTTQ/1.1 200 OK\r\n\r\n", []).broken).toEqual(["malformed HTTP response: status line"]);
    expect(feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", []).broken).toEqual(["malformed HTTP response: chunk size"]);
    expect(feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", []).broken).toEqual(["malformed HTTP response: chunk end"]);
    expect(feed("HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", []).broken).toEqual(["malformed HTTP response: content-length"]);
    const extra = feed("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA", []);
    expect([extra.body, extra.ended, extra.ok]).toEqual(["ok", 1, false]);
  });

  test("keep-alive: HTTP/1.1 unless Connection: close, HTTP/1.0 only with Connection: keep-alive", () => {
    const ok = (head: string) => feed(`${head}\r\ncontent-length: 2\r\n\r\nok`, []);
    expect(ok("HTTP/1.1 200 OK")).toMatchObject({ body: "ok", ended: 1, ok: true });
    expect(ok("HTTP/1.1 200 OK\r\nConnection: Close")).toMatchObject({ body: "ok", ended: 1, ok: false });
    expect(ok("HTTP/1.0 200 OK")).toMatchObject({ body: "ok", ended: 1, ok: false });
    expect(ok("HTTP/1.0 200 OK\r\nConnection: keep-alive")).toMatchObject({ body: "ok", ended: 1, ok: true });
    // Only once the response ended: a push before that still says the connection is fine.
    const c = collect();
    expect(c.parser.push(enc("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\no"))).toBe(true);
    expect(c.parser.push(enc("k"))).toBe(false);
  });
});
