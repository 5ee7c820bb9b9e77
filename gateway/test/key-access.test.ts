/**
 * What a hashed API key may use: a key with a `models` list sees and uses only those (others read as not found, on
 * every route: listing, generation, the Responses and Messages APIs, tokenize, pass-through), and a key's `priority`
 * goes to the model server on its requests that set none. Keys from the config (`auth.keys`), with the official
 * openai client against fake model servers.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { hashApiKey } from "../src/auth/key-hash";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { type OpenAIFake, startOpenAIFake } from "./fakes/openai-fake";
import { CHATML } from "./fakes/test-model";
import { startGateway, type TestGateway } from "./start-gateway";

const pepper = "test-pepper";
let a: ConnectFake;
let b: ConnectFake;
let up: OpenAIFake;
let t: TestGateway;
let limited: OpenAI;

beforeAll(async () => {
  a = await startConnectFake({ modelId: "model-a", chatTemplate: CHATML });
  b = await startConnectFake({ modelId: "model-b", chatTemplate: CHATML });
  up = startOpenAIFake({ models: ["embed-model"] });
  t = await startGateway(
    {
      auth: {
        pepper,
        keys: [
          { id: "full", hash: hashApiKey("sk-full", pepper) },
          { id: "team", hash: hashApiKey("sk-team", pepper), models: ["model-a"], priority: 7 },
        ],
      },
      backends: [{ kind: "dispatch", url: a.url }, { kind: "dispatch", url: b.url }, { kind: "openai", url: up.url }],
    },
    "sk-full",
  );
  limited = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: "sk-team", maxRetries: 0 });
});
afterAll(async () => {
  await t.stop();
  a.stop();
  b.stop();
  up.stop();
});

const messages = [{ role: "user" as const, content: "hi" }];

test("a key limited to some models lists and uses only those; the others are 404 everywhere", async () => {
  expect((await t.client.models.list()).data.map((m) => m.id).sort()).toEqual(["embed-model", "model-a", "model-b"]);
  expect((await limited.models.list()).data.map((m) => m.id)).toEqual(["model-a"]);
  expect((await limited.chat.completions.create({ model: "model-a", messages })).choices[0]!.message.content).toBe("Hello, world!");
  const notFound = (p: Promise<unknown>) => p.then(() => null, (e) => e).then((e) => expect(e).toBeInstanceOf(OpenAI.NotFoundError));
  await notFound(limited.chat.completions.create({ model: "model-b", messages }));
  await notFound(limited.models.retrieve("model-b"));
  await notFound(limited.responses.create({ model: "model-b", input: "hi" }));
  await notFound(limited.embeddings.create({ model: "embed-model", input: "x" }));
  for (const [path, body] of [
    ["/tokenize", { model: "model-b", prompt: "x" }],
    ["/v1/messages", { model: "model-b", max_tokens: 4, messages }],
  ] as const) {
    const res = await fetch(`${t.url}${path}`, { method: "POST", headers: { authorization: "Bearer sk-team" }, body: JSON.stringify(body) });
    expect(res.status).toBe(404);
  }
  // the full key reaches every model
  expect((await t.client.chat.completions.create({ model: "model-b", messages })).choices[0]!.message.content).toBe("Hello, world!");
});

test("a key's priority goes on its requests that set none; a request's own wins", async () => {
  await limited.chat.completions.create({ model: "model-a", messages });
  expect(a.requests.at(-1)!.priority).toBe(7);
  await limited.chat.completions.create({ model: "model-a", messages, priority: -2 } as never);
  expect(a.requests.at(-1)!.priority).toBe(-2);
  await t.client.chat.completions.create({ model: "model-a", messages });
  expect(a.requests.at(-1)!.priority).toBe(0);
});
