/** A dispatch backend reached over gRPC (HTTP/2, h2c) instead of Connect over HTTP/1.1. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { startGateway, type TestGateway } from "./start-gateway";
import { abortAtChunk, waitUntil } from "./stream-abort";

let fake: ConnectFake;
let t: TestGateway;

beforeAll(async () => {
  fake = await startConnectFake({ grpc: true });
  t = await startGateway({ backends: [{ kind: "dispatch", url: fake.grpcUrl, protocol: "grpc" }], logging: { requests: false } });
});
afterAll(async () => {
  await t.stop();
  fake.stop();
});

test("model info, streaming and cancellation over gRPC", async () => {
  const messages = [{ role: "user" as const, content: "hi" }];
  expect((await t.client.models.list()).data.map((m) => m.id)).toEqual(["fake-moe"]);
  const r = await t.client.chat.completions.create({ model: "fake-moe", messages });
  expect(r.choices[0]!.message.content).toBe("Hello, world!");
  fake.reply = "y".repeat(300);
  fake.tokenDelayMs = 10;
  const s = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
  const abortedAt = await abortAtChunk(s, 4);
  await waitUntil(() => fake.cancels.length !== 0, 1000);
  expect(fake.cancels.length).toBe(1);
  expect(fake.cancels[0]! - abortedAt).toBeLessThan(100);
});
