import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { GenerateRequestSchema, GenerateResponseSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { type ConnectFake, startConnectFake } from "../../test/fakes/connect-fake";
import { createSocketStreams, type SocketStreams } from "./socket-stream";

let fake: ConnectFake;
let streams: SocketStreams;
beforeAll(async () => {
  fake = await startConnectFake();
  streams = createSocketStreams(fake.url);
});
afterAll(() => {
  streams.close();
  fake.stop();
});

const GENERATE = "dispatch.v1.ModelService/Generate";
const request = toBinary(GenerateRequestSchema, create(GenerateRequestSchema, { requestId: "t", model: "fake-moe", promptTokenIds: [104, 105], stop: { maxTokens: 50 } }));
const call = (o: { method?: string; signal?: AbortSignal; s?: SocketStreams; headers?: Record<string, string> } = {}) =>
  (o.s ?? streams).call({ method: o.method ?? GENERATE, request, signal: o.signal ?? AbortSignal.timeout(5000), headers: o.headers });

async function codeOf(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return (err as ConnectError).code;
  }
  return undefined;
}

async function text(it: AsyncIterable<Uint8Array>): Promise<string> {
  const ids: number[] = [];
  for await (const bytes of it) ids.push(...fromBinary(GenerateResponseSchema, bytes).tokenIds);
  return String.fromCharCode(...ids.filter((i) => i < 256));
}

describe("createSocketStreams", () => {
  test("every message in order, the request as sent, trace headers passed; the connection is kept and reused", async () => {
    fake.reply = "Hello";
    const before = fake.requests.length;
    expect(await text(call({ headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } }))).toBe("Hello");
    expect(fake.requests[before]!.promptTokenIds).toEqual([104, 105]);
    expect(streams.idle).toBe(1);
    fake.reply = "again";
    expect(await text(call())).toBe("again");
    expect(streams.idle).toBe(1);
    // Two at once: two connections, both kept.
    const [a, b] = await Promise.all([text(call()), text(call())]);
    expect(a + b).toBe("againagain");
    expect(streams.idle).toBe(2);
  });

  test("a consumer that stops after the finish message keeps the connection; one that stops earlier cancels the call", async () => {
    fake.reply = "ab";
    const s = createSocketStreams(fake.url);
    for await (const bytes of call({ s })) if (fromBinary(GenerateResponseSchema, bytes).finishReason) break;
    await Bun.sleep(20);
    expect(s.idle).toBe(1);
    fake.reply = "a long reply that keeps streaming for a while";
    fake.tokenDelayMs = 5;
    const cancels = fake.cancels.length;
    for await (const _ of call({ s })) break;
    const until = Date.now() + 1000;
    while (fake.cancels.length === cancels && Date.now() < until) await Bun.sleep(5);
    expect(fake.cancels.length).toBe(cancels + 1);
    expect(s.idle).toBe(0);
    const ctl = new AbortController();
    const it = call({ s, signal: ctl.signal });
    await it.next();
    ctl.abort();
    expect(await codeOf(it.next())).toBe(Code.Canceled);
    const pre = new AbortController();
    pre.abort();
    expect(await codeOf(call({ s, signal: pre.signal }).next())).toBe(Code.Canceled);
    fake.tokenDelayMs = 0;
    s.close();
  });

  test("errors: the end-of-stream error's code, HTTP 404, a refused connection, a bad header", async () => {
    fake.failBeforeFirst = 1;
    fake.failCode = Code.ResourceExhausted;
    expect(await codeOf(Array.fromAsync(call()))).toBe(Code.ResourceExhausted);
    expect(await codeOf(Array.fromAsync(call({ method: "dispatch.v1.ModelService/Nope" })))).toBe(Code.Unimplemented);
    fake.reply = "ok";
    expect(await text(call())).toBe("ok"); // the connections are still good after those
    const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    const port = closed.port;
    await closed.stop(true);
    expect(await codeOf(Array.fromAsync(call({ s: createSocketStreams(`http://127.0.0.1:${port}`) })))).toBe(Code.Unavailable);
    expect(await codeOf(Array.fromAsync(call({ headers: { "x-a": "1\r\nx-b: 2" } })))).toBe(Code.Internal);
  });

  test("a kept connection the server closes when reused is replaced once without an error; a server that dies mid-stream is Unavailable", async () => {
    // A raw server: answers the first request on a connection, then closes that connection.
    const answer = (await Array.fromAsync(call())).length; // just to have the fake warm
    expect(answer).toBeGreaterThan(0);
    const msg = toBinary(GenerateResponseSchema, create(GenerateResponseSchema, { tokenIds: [65], finishReason: 1 }));
    const env = (flags: number, b: Uint8Array) => {
      const out = new Uint8Array(5 + b.length);
      out[0] = flags;
      new DataView(out.buffer).setUint32(1, b.length);
      out.set(b, 5);
      return out;
    };
    const body = Buffer.concat([env(0, msg), env(2, new TextEncoder().encode("{}"))]);
    // A raw server: answers the first request on a connection and closes it at the second without
    // a byte (an idle connection closed just as it was reused); "cut" ends the stream mid-message.
    let mode: "once-per-connection" | "cut" = "once-per-connection";
    let answered = 0;
    const srv = Bun.listen<{ n: number }>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open(sock) {
          sock.data = { n: 0 };
        },
        data(sock, d) {
          if (!Buffer.from(d).includes("\r\n\r\n")) return;
          if (sock.data.n++ > 0) return void sock.end();
          answered++;
          const head = `HTTP/1.1 200 OK\r\ncontent-type: application/connect+proto\r\ntransfer-encoding: chunked\r\n\r\n`;
          if (mode === "cut") {
            sock.write(Buffer.concat([Buffer.from(head + `${(5 + msg.length).toString(16)}\r\n`), env(0, msg).subarray(0, 3)]));
            return void sock.end();
          }
          sock.write(Buffer.concat([Buffer.from(head + `${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")]));
        },
      },
    });
    const s = createSocketStreams(`http://127.0.0.1:${srv.port}`);
    expect((await Array.fromAsync(call({ s }))).length).toBe(1);
    expect(s.idle).toBe(1);
    expect((await Array.fromAsync(call({ s }))).length).toBe(1); // the kept one closed at once, the retry answered
    expect(answered).toBe(2);
    mode = "cut";
    expect(await codeOf(Array.fromAsync(call({ s })))).toBe(Code.Unavailable);
    s.close();
    srv.stop(true);
  });
});
