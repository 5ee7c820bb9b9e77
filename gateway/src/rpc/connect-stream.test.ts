import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { GenerateRequestSchema, GenerateResponseSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { type ConnectFake, startConnectFake } from "../../test/fakes/connect-fake";
import { connectServerStream } from "./connect-stream";

let fake: ConnectFake;
beforeAll(async () => {
  fake = await startConnectFake();
});
afterAll(() => fake.stop());

const request = toBinary(GenerateRequestSchema, create(GenerateRequestSchema, { requestId: "t", model: "fake-moe", promptTokenIds: [104, 105], stop: { maxTokens: 50 } }));
const call = (o: { method?: string; signal?: AbortSignal; url?: string } = {}) =>
  connectServerStream({ url: o.url ?? fake.url, method: o.method ?? "dispatch.v1.ModelService/Generate", request, signal: o.signal ?? AbortSignal.timeout(5000) });

async function codeOf(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return (err as ConnectError).code;
  }
  return undefined;
}

describe("connectServerStream", () => {
  test("every message of a Generate stream, in order, then the end", async () => {
    fake.reply = "Hello";
    const ids: number[] = [];
    let finish = 0;
    for await (const bytes of call()) {
      const m = fromBinary(GenerateResponseSchema, bytes);
      ids.push(...m.tokenIds);
      if (m.finishReason) finish = m.finishReason;
    }
    expect(String.fromCharCode(...ids.filter((i) => i < 256))).toBe("Hello");
    expect(finish).not.toBe(0);
  });

  test("an error in the end-of-stream message is thrown with its code", async () => {
    fake.failBeforeFirst = 1;
    fake.failCode = Code.ResourceExhausted;
    expect(await codeOf(Array.fromAsync(call()))).toBe(Code.ResourceExhausted);
  });

  test("an unknown method (HTTP 404) and a refused connection are ConnectErrors", async () => {
    expect(await codeOf(Array.fromAsync(call({ method: "dispatch.v1.ModelService/Nope" })))).toBe(Code.Unimplemented);
    const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    const port = closed.port;
    await closed.stop(true); // a loopback port nothing listens on now
    expect(await codeOf(Array.fromAsync(call({ url: `http://127.0.0.1:${port}` })))).toBe(Code.Unavailable);
  });

  test("a consumer that stops early cancels the server's call; an aborted signal is Canceled", async () => {
    fake.reply = "a long reply that keeps streaming for a while";
    fake.tokenDelayMs = 5;
    const before = fake.cancels.length;
    for await (const _ of call()) break;
    const until = Date.now() + 1000;
    while (fake.cancels.length === before && Date.now() < until) await Bun.sleep(5);
    expect(fake.cancels.length).toBe(before + 1);
    const ctl = new AbortController();
    const it = call({ signal: ctl.signal });
    await it.next();
    ctl.abort();
    expect(await codeOf(it.next())).toBe(Code.Canceled);
    fake.tokenDelayMs = 0;
  });
});
