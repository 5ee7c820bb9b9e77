import { afterAll, beforeAll, describe, expect, test } from "bun:test";
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
