/**
 * Every error shape the gateway produces, as the official openai client sees
 * it: status, and OpenAI's {error:{message,type,param,code}} body.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Code } from "@connectrpc/connect";
import OpenAI, { APIError } from "openai";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { startGateway, type TestGateway } from "./start-gateway";

let fake: ConnectFake;
let t: TestGateway;
const messages = [{ role: "user" as const, content: "hi" }];

async function apiError(p: Promise<unknown>): Promise<APIError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof APIError) return err;
    throw err;
  }
  throw new Error("expected an API error");
}

function expectShape(e: APIError, status: number, code: string | null, param: string | null = null) {
  expect(e.status).toBe(status);
  expect(Object.keys(e.error as object).sort()).toEqual(["code", "message", "param", "type"]);
  expect(e.code ?? null).toBe(code);
  expect(e.param ?? null).toBe(param);
  expect(typeof (e.error as { message: string }).message).toBe("string");
}

beforeAll(async () => {
  fake = await startConnectFake();
  t = await startGateway({
    backends: [{ kind: "dispatch", url: fake.url }],
    server: { max_body_bytes: 2048, max_in_flight: 1 },
    retry: { max_attempts: 1 },
    logging: { requests: false },
  });
});
afterAll(async () => {
  await t.stop();
  fake.stop();
});

describe("400 bad request", () => {
  const cases: [string, Record<string, unknown>, string | null, string | null][] = [
    ["n above 128", { n: 129 }, "invalid_value", "n"],
    ["temperature out of range", { temperature: 3 }, "invalid_value", "temperature"],
    ["top_p wrong type", { top_p: "high" }, "invalid_type", "top_p"],
    ["five stop strings", { stop: ["a", "b", "c", "d", "e"] }, "invalid_value", "stop"],
    ["max_tokens not an integer", { max_tokens: 1.5 }, "invalid_type", "max_tokens"],
    ["stream_options without stream", { stream_options: { include_usage: true } }, "invalid_value", "stream_options"],
    ["image content part", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, "unsupported_value", "messages[0].content[0].type"],
    ["bad role", { messages: [{ role: "robot", content: "x" }] }, "invalid_value", "messages[0].role"],
    ["empty messages", { messages: [] }, "invalid_value", "messages"],
    ["tools on a dispatch model", { tools: [{ type: "function", function: { name: "f" } }] }, "unsupported_parameter", "tools"],
    ["context too long", { max_tokens: 5000 }, "context_length_exceeded", "messages"],
  ];
  for (const [name, patch, code, param] of cases) {
    test(name, async () => {
      const e = await apiError(t.client.chat.completions.create({ model: "fake-moe", messages, ...patch } as never));
      expectShape(e, 400, code, param);
    });
  }

  test("missing model and invalid JSON", async () => {
    const e = await apiError(t.client.chat.completions.create({ messages } as never));
    expectShape(e, 400, "missing_required_parameter", "model");
    const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: "{nope" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_json");
  });
});

test("401 with a wrong or missing key when keys are configured", async () => {
  const g = await startGateway({ backends: [{ kind: "dispatch", url: fake.url }], auth: { api_keys: ["right"] } }, "wrong");
  try {
    expectShape(await apiError(g.client.chat.completions.create({ model: "fake-moe", messages })), 401, "invalid_api_key");
    const res = await fetch(`${g.url}/v1/models`);
    expect(res.status).toBe(401);
    const ok = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: "right", maxRetries: 0 });
    expect((await ok.chat.completions.create({ model: "fake-moe", messages })).choices[0]!.message.content).toBe("Hello, world!");
  } finally {
    await g.stop();
  }
});

test("404 for an unknown model and an unknown route", async () => {
  expectShape(await apiError(t.client.chat.completions.create({ model: "nope", messages })), 404, "model_not_found", "model");
  const res = await fetch(`${t.url}/v1/engines`);
  expect(res.status).toBe(404);
  expect(((await res.json()) as { error: { code: string } }).error.code).toBe("unknown_url");
});

test("413 for a body over the limit", async () => {
  const e = await apiError(t.client.chat.completions.create({ model: "fake-moe", messages: [{ role: "user", content: "x".repeat(5000) }] }));
  expectShape(e, 413, "request_too_large");
});

test("429 past max_in_flight, with Retry-After", async () => {
  fake.tokenDelayMs = 20;
  fake.reply = "slow reply";
  const first = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
  const e = await apiError(t.client.completions.create({ model: "fake-moe", prompt: "x" }));
  expectShape(e, 429, "rate_limit_exceeded");
  expect(e.headers?.get("retry-after")).toBe("1");
  for await (const _ of first);
  fake.tokenDelayMs = 0;
  fake.reply = "Hello, world!";
});

describe("5xx from the model server", () => {
  const cases: [string, Code, number, string][] = [
    ["internal error -> 502", Code.Internal, 502, "upstream_error"],
    ["unavailable -> 503", Code.Unavailable, 503, "upstream_unavailable"],
    ["deadline exceeded -> 504", Code.DeadlineExceeded, 504, "upstream_timeout"],
    ["resource exhausted -> 429", Code.ResourceExhausted, 429, "rate_limit_exceeded"],
  ];
  for (const [name, code, status, errCode] of cases) {
    test(name, async () => {
      fake.failBeforeFirst = 1;
      fake.failCode = code;
      expectShape(await apiError(t.client.chat.completions.create({ model: "fake-moe", messages })), status, errCode);
      // A single failure does not eject (unhealthy_after: 2); the next call works.
      expect((await t.client.chat.completions.create({ model: "fake-moe", messages })).choices[0]!.message.content).toBe("Hello, world!");
    });
  }

  test("503 when no backend is healthy, and return after recovery", async () => {
    fake.serving = false;
    await t.gw.health.checkNow();
    await t.gw.health.checkNow();
    expect((await fetch(`${t.url}/readyz`)).status).toBe(503);
    expectShape(await apiError(t.client.chat.completions.create({ model: "fake-moe", messages })), 503, "upstream_unavailable");
    fake.serving = true;
    await t.gw.health.checkNow();
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    expect((await t.client.chat.completions.create({ model: "fake-moe", messages })).choices[0]!.message.content).toBe("Hello, world!");
  });
});

test("400 for a body that is not valid UTF-8", async () => {
  const bytes = new Uint8Array([...new TextEncoder().encode('{"model":"fake-moe","messages":[{"role":"user","content":"'), 0xc3, ...new TextEncoder().encode('"}]}')]);
  const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: bytes });
  expect(res.status).toBe(400);
  expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_encoding");
});
