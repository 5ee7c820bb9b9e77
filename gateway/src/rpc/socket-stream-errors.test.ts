/**
 * The errors the gateway sees from Generate over our sockets are the ones it
 * saw over fetch (DISPATCH_GENERATE_FETCH=1): both model clients call the same
 * raw loopback server and their GatewayErrors (status, code, retryable,
 * message) are compared, so withRetry's failover decisions do not change.
 */
import { describe, expect, test } from "bun:test";
import { GatewayError } from "../errors";
import { endStream, okChunked } from "../../test/raw-http1-server";
import { msg, server } from "../../test/socket-call-kit";
import { createModelClient, type GenerateParams } from "./model-client";

const params: GenerateParams = { requestId: "e", model: "m", promptTokenIds: new Uint32Array([1, 2, 3]), stopTokenIds: [] };

/** What a Generate call on `url` ends with: its token ids and the GatewayError, if any. */
async function outcome(url: string, sockets: boolean, signal: AbortSignal = AbortSignal.timeout(3000)) {
  const client = createModelClient({ url, protocol: "connect", sockets, fetchStreams: { inFlight: 0, max: 100 } });
  const ids: number[] = [];
  try {
    for await (const step of client.generate(params, signal)) ids.push(...step.tokenIds);
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    const e = err as GatewayError;
    return { ids, status: e.status, code: e.code, type: e.type, retryable: e.retryable, message: e.message.replaceAll(url, "URL") };
  }
  return { ids };
}

const json = (status: string, body: string, extra = "") =>
  `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

const responses: [string, Uint8Array | string, Record<string, unknown>][] = [
  ["429 with a Connect error body", json("429 Too Many Requests", '{"code":"resource_exhausted","message":"queue full"}'), { status: 429, retryable: true }],
  ["503 with a Connect error body, then Connection: close", json("503 Service Unavailable", '{"code":"unavailable","message":"draining"}', "connection: close\r\n"), { status: 503, retryable: true }],
  ["400 invalid_argument", json("400 Bad Request", '{"code":"invalid_argument","message":"prompt too long"}'), { status: 400, retryable: false }],
  ["404 with an empty body", "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", { status: 502, retryable: true }],
  ["502 with a chunked text body", "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n5\r\nproxy\r\n0\r\n\r\n", { status: 503 }],
  ["200 with one message and an end-of-stream error", okChunked([msg(7), endStream({ code: "resource_exhausted", message: "kv full" })]), { ids: [7], status: 429 }],
  ["200 that ends without the end-of-stream message", okChunked([msg(7)]), { ids: [7], status: 503, retryable: true }],
];

describe("Generate errors: sockets vs fetch", () => {
  for (const [name, bytes, expected] of responses) {
    test(name, async () => {
      const srv = server((c) => c.sock.write(bytes));
      const viaSockets = await outcome(srv.url, true);
      const viaFetch = await outcome(srv.url, false);
      expect(viaSockets).toMatchObject(expected);
      expect(viaSockets).toEqual(viaFetch);
    });
  }

  test("a server that closes mid-body: 503, retryable, on both", async () => {
    const srv = server((c) => {
      c.sock.write(okChunked([msg(7), endStream()]).subarray(0, 100 - 40));
      c.sock.end();
    });
    const viaSockets = await outcome(srv.url, true);
    const viaFetch = await outcome(srv.url, false);
    expect(viaSockets).toMatchObject({ status: 503, retryable: true, code: viaFetch.code, type: viaFetch.type });
    expect(viaFetch).toMatchObject({ status: 503, retryable: true });
  });

  test("a deadline while the server is silent: the same cancelled error on both", async () => {
    const srv = server(() => {});
    const viaSockets = await outcome(srv.url, true, AbortSignal.timeout(50));
    const viaFetch = await outcome(srv.url, false, AbortSignal.timeout(50));
    expect(viaSockets).toMatchObject({ status: 499, retryable: false });
    expect(viaSockets).toEqual(viaFetch);
  });
});
