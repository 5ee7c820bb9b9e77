/**
 * The rest of an OpenAI-compatible server's JSON API through the gateway (embeddings here, with the official openai
 * client): sent as it is to an OpenAI-HTTP backend serving the model, its answer back as it is; a failing server is
 * retried on another; the server's own 4xx comes back unchanged; a dispatch-only model, a missing model or an unknown
 * one are clear 4xx.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { type OpenAIFake, startOpenAIFake } from "./fakes/openai-fake";
import { startGateway, type TestGateway } from "./start-gateway";

let a: OpenAIFake;
let b: OpenAIFake;
let d: ConnectFake;
let t: TestGateway;

beforeAll(async () => {
  a = startOpenAIFake({ models: ["embed-model"] });
  b = startOpenAIFake({ models: ["embed-model"] });
  d = await startConnectFake({ modelId: "tiny-moe" });
  t = await startGateway({ backends: [{ kind: "openai", url: a.url, id: "a" }, { kind: "openai", url: b.url, id: "b" }, { kind: "dispatch", url: d.url }] });
});
afterAll(async () => {
  await t.stop();
  a.stop();
  b.stop();
  d.stop();
});
afterEach(() => {
  a.failCount = b.failCount = 0;
});

test("embeddings: the body as sent, the server's answer as it is", async () => {
  const r = await t.client.embeddings.create({ model: "embed-model", input: ["hello", "hi"], encoding_format: "float" });
  expect(r.data.map((e) => e.index)).toEqual([0, 1]);
  expect(r.data[0]!.embedding[0]).toBe(5);
  const sent = [...a.bodies, ...b.bodies].map((x) => JSON.parse(x));
  expect(sent.at(-1)).toEqual({ model: "embed-model", input: ["hello", "hi"], encoding_format: "float" });
});

test("a server answering 503 is retried on the other", async () => {
  // with nothing in flight the first server listed is picked first: it fails once
  a.failStatus = 503;
  a.failCount = 1;
  const [na, nb] = [a.bodies.length, b.bodies.length];
  const r = await t.client.embeddings.create({ model: "embed-model", input: "x", encoding_format: "float" });
  expect(r.data).toHaveLength(1);
  expect([a.bodies.length - na, b.bodies.length - nb]).toEqual([1, 1]);
});

test("the server's own 4xx comes back unchanged; unknown routes there too", async () => {
  a.failStatus = 400;
  a.failCount = 1;
  const res = await fetch(`${t.url}/v1/embeddings`, { method: "POST", headers: { authorization: "Bearer test-key" }, body: JSON.stringify({ model: "embed-model", input: "x" }) });
  expect(res.status).toBe(400);
  expect(((await res.json()) as { error: { message: string } }).error.message).toBe("injected 400");
  const rr = await fetch(`${t.url}/v1/rerank`, { method: "POST", body: JSON.stringify({ model: "embed-model", query: "q", documents: ["d"] }) });
  expect(rr.status).toBe(404);
  expect(((await rr.json()) as { error: { message: string } }).error.message).toBe("no route /v1/rerank");
});

test("a dispatch-only model, no model, an unknown model: 404, 400, 404", async () => {
  const post = (body: unknown) => fetch(`${t.url}/v1/embeddings`, { method: "POST", body: JSON.stringify(body) });
  const dispatchOnly = await post({ model: "tiny-moe", input: "x" });
  expect(dispatchOnly.status).toBe(404);
  expect(((await dispatchOnly.json()) as { error: { message: string } }).error.message).toContain("dispatch model servers");
  expect((await post({ input: "x" })).status).toBe(400);
  expect((await post({ model: "nope", input: "x" })).status).toBe(404);
  expect(await t.client.embeddings.create({ model: "nope", input: "x" }).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
});
