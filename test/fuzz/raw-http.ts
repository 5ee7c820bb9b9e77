/**
 * HTTP/1.1 abuse below what fetch can send, over a raw TCP socket: broken
 * request lines, bad header bytes, conflicting or invalid lengths, bad chunked
 * framing, oversized URLs and headers, pipelined garbage. Each message is
 * complete; the answer must be a 4xx or a close (never a 5xx, never silence
 * with the connection held open).
 *
 * @example
 * const results = await fuzzRawHttp("127.0.0.1", port, rawCases(model, createRng(1), 200), { stuckMs: 3000, concurrency: 8 });
 */
import type { Rng } from "./rng";

export interface RawCase {
  what: string;
  bytes: Uint8Array;
}

export interface RawResult {
  what: string;
  /** Status from the first response line, 0 if the server closed without answering. */
  status: number;
  /** The connection stayed open with no answer for stuckMs. */
  stuck: boolean;
}

const enc = new TextEncoder();

export function rawCases(model: string, r: Rng, count: number): RawCase[] {
  const body = JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
  const path = "/v1/chat/completions";
  const fixed: Array<[string, string | Uint8Array]> = [
    ["garbage request line", "GARBAGE\r\n\r\n"],
    ["no version", `POST ${path}\r\nHost: x\r\n\r\n`],
    ["HTTP/9.9", `POST ${path} HTTP/9.9\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`],
    ["header without colon", `POST ${path} HTTP/1.1\r\nHost: x\r\nBadHeader\r\nContent-Length: 2\r\n\r\n{}`],
    ["NUL in header", `POST ${path} HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\nContent-Length: 2\r\n\r\n{}`],
    ["space before colon", `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length : 2\r\n\r\n{}`],
    ["negative content-length", `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}`],
    ["non-numeric content-length", `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}`],
    ["two different content-lengths", `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x`],
    ["content-length and chunked", `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
    ["bad chunk size", `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n`],
    ["chunk size overflow", `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n{}\r\n0\r\n\r\n`],
    ["unknown transfer-encoding", `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, rot13\r\n\r\n{}`],
    ["URL 64 KiB", `GET /${"a".repeat(65536)} HTTP/1.1\r\nHost: x\r\n\r\n`],
    ["header 80 KiB", `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(81920)}\r\n\r\n`],
    ["bare LF line endings", `POST ${path} HTTP/1.1\nHost: x\nContent-Length: ${body.length}\n\n${body}`],
    ["absolute-form URL to another host", `GET http://169.254.169.254/latest HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n`],
    ["CONNECT method", "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n"],
    ["pipelined valid then garbage", `GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n\u0001\u0002\u0003 junk\r\n\r\n`],
    ["upgrade to h2c", `GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n`],
    ["HTTP/2 preface on HTTP/1.1 port", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"],
  ];
  const out: RawCase[] = fixed.map(([what, b]) => ({ what, bytes: typeof b === "string" ? enc.encode(b) : b }));
  while (out.length < count) {
    const kind = r.int(0, 2);
    if (kind === 0) out.push({ what: "random bytes then CRLFCRLF", bytes: new Uint8Array([...r.bytes(r.int(1, 512)), 13, 10, 13, 10]) });
    else if (kind === 1) {
      const n = r.int(0, body.length);
      const mangled = body.slice(0, n) + r.string(r.int(0, 8)) + body.slice(n);
      out.push({ what: "mangled header block", bytes: enc.encode(`POST ${path} HTTP/1.1\r\nHost: x\r\n${r.string(r.int(1, 40))}: ${r.string(r.int(0, 40))}\r\nContent-Length: ${enc.encode(mangled).length}\r\n\r\n${mangled}`) });
    } else out.push({ what: "random method and path", bytes: enc.encode(`${r.string(r.int(1, 12), "ABCDEFGHIJKLMNOPQRSTUVWXYZ-")} /${r.string(r.int(0, 64))} HTTP/1.1\r\nHost: x\r\n\r\n`) });
  }
  return out.slice(0, count);
}

function sendRaw(host: string, port: number, c: RawCase, stuckMs: number): Promise<RawResult> {
  return new Promise((resolve) => {
    let got = "";
    let settled = false;
    const finish = (stuck: boolean, sock?: { end(): void }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock?.end();
      const m = got.match(/^HTTP\/1\.[01] (\d{3})/);
      resolve({ what: c.what, status: m ? Number(m[1]) : 0, stuck });
    };
    let socketRef: { end(): void } | undefined;
    const timer = setTimeout(() => finish(got.length === 0, socketRef), stuckMs);
    Bun.connect({
      hostname: host,
      port,
      socket: {
        open(s) {
          socketRef = s;
          s.write(c.bytes);
        },
        data(s, d) {
          got += new TextDecoder().decode(d);
          // One status line is enough to judge; close our side.
          if (/^HTTP\/1\.[01] \d{3}/.test(got)) finish(false, s);
        },
        close() {
          finish(false);
        },
        error() {
          finish(false);
        },
      },
    }).catch(() => finish(false));
  });
}

export async function fuzzRawHttp(host: string, port: number, cases: readonly RawCase[], o: { stuckMs: number; concurrency: number }): Promise<RawResult[]> {
  const results: RawResult[] = [];
  let next = 0;
  const worker = async () => {
    while (next < cases.length) results.push(await sendRaw(host, port, cases[next++]!, o.stuckMs));
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  return results;
}
