import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { heapStats } from "bun:jsc";
import { type ConnectFake, startConnectFake } from "../../test/fakes/connect-fake";
import { createModelClient, type FetchStreamBudget } from "./model-client";

let fake: ConnectFake;
beforeAll(async () => {
  fake = await startConnectFake();
});
afterAll(() => fake.stop());

const params = (id: string) => ({ requestId: id, model: "fake-moe", promptTokenIds: Uint32Array.from([104, 105]), stopTokenIds: [], maxTokens: 50 });

async function collect(it: AsyncIterable<{ tokenIds: number[] }>): Promise<string> {
  let s = "";
  for await (const step of it) s += String.fromCharCode(...step.tokenIds.filter((i) => i < 256));
  return s;
}

describe("model client Generate over Connect", () => {
  test("past the fetch budget a stream goes over the Connect transport; both paths stream the same", async () => {
    fake.reply = "budget";
    fake.tokenDelayMs = 3;
    const budget: FetchStreamBudget = { inFlight: 0, max: 1 };
    const client = createModelClient({ url: fake.url, protocol: "connect", fetchStreams: budget, sockets: false });
    const signal = AbortSignal.timeout(5000);
    const a = client.generate(params("a"), signal)[Symbol.asyncIterator]();
    const b = client.generate(params("b"), signal)[Symbol.asyncIterator]();
    const [fa, fb] = await Promise.all([a.next(), b.next()]);
    expect(budget.inFlight).toBe(1); // one over fetch, the other over the transport
    const rest = await Promise.all([collect({ [Symbol.asyncIterator]: () => a }), collect({ [Symbol.asyncIterator]: () => b })]);
    const first = (r: IteratorResult<{ tokenIds: number[] }>) => (r.done ? "" : String.fromCharCode(...r.value.tokenIds));
    expect(first(fa) + rest[0]).toBe("budget");
    expect(first(fb) + rest[1]).toBe("budget");
    expect(budget.inFlight).toBe(0);
    fake.tokenDelayMs = 0;
  });

  test("a budget of 0 sends every call over the transport", async () => {
    fake.reply = "plain";
    const budget: FetchStreamBudget = { inFlight: 0, max: 0 };
    const client = createModelClient({ url: fake.url, protocol: "connect", fetchStreams: budget, sockets: false });
    expect(await collect(client.generate(params("c"), AbortSignal.timeout(5000)))).toBe("plain");
  });
});

describe("model client watch streams", () => {
  const promises = () => {
    Bun.gc(true);
    return (heapStats().objectTypeCounts as Record<string, number>).Promise ?? 0;
  };
  /** Reads `n` messages of a stream that then stays open; the Promise count over the baseline while it is open. */
  async function heldWhileOpen(it: AsyncIterable<unknown>, n: number): Promise<number> {
    const base = promises();
    let got = 0;
    const iter = it[Symbol.asyncIterator]();
    while (got < n) {
      const r = await iter.next();
      if (r.done) throw new Error(`the stream ended after ${got} messages`);
      got++;
    }
    return promises() - base;
  }

  test("a long-lived stream holds no message it delivered (connect-es's call kept one promise and the message per read)", async () => {
    fake.watchMessages = 3000;
    for (const sockets of [true, false]) {
      const client = createModelClient({ url: fake.url, protocol: "connect", sockets });
      const ctl = new AbortController();
      const load = await heldWhileOpen(client.watchLoad(1, ctl.signal), 3000);
      const kv = await heldWhileOpen(client.watchKvEvents(true, ctl.signal), 3000);
      ctl.abort();
      // through connect-es's transport each read left a promise behind: ~3,000 here
      expect(load).toBeLessThan(300);
      expect(kv).toBeLessThan(300);
    }
    fake.watchMessages = 0;
  });

  test("over a gRPC transport a watch stream ends after its message bound, and the messages arrive intact", async () => {
    const g = await startConnectFake({ grpc: true });
    try {
      g.watchMessages = 120;
      const client = createModelClient({ url: g.grpcUrl, protocol: "grpc", transportWatchMaxMessages: 50 });
      const ctl = new AbortController();
      const seen: number[] = [];
      for await (const b of client.watchKvEvents(true, ctl.signal)) seen.push(Number(b.sequence));
      expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => i));
      ctl.abort();
    } finally {
      g.stop();
    }
  });
});
