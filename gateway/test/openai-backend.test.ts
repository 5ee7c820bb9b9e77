/**
 * The gateway as a drop-in router in front of OpenAI-compatible HTTP servers
 * (vLLM / SGLang stand-ins), driven by the official openai client.
 */
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { APIError } from "openai";
import { type OpenAIFake, startOpenAIFake } from "./fakes/openai-fake";
import { startGateway, type TestGateway } from "./start-gateway";
import { abortAtChunk, waitUntil } from "./stream-abort";

let a: OpenAIFake;
let b: OpenAIFake;
let t: TestGateway;
const messages = [{ role: "user" as const, content: "hi" }];

beforeAll(async () => {
  a = startOpenAIFake();
  b = startOpenAIFake();
  t = await startGateway({
    backends: [
      { kind: "openai", url: a.url, id: "a" },
      { kind: "openai", url: b.url, id: "b" },
    ],
    routing: { policy: "round-robin" },
    logging: { requests: false },
  });
});
afterAll(async () => {
  await t.stop();
  a.stop();
  b.stop();
});
afterEach(() => {
  for (const f of [a, b]) {
    f.delayMs = 0;
    f.failCount = 0;
    f.dropAfter = -1;
    f.pieces = ["Hel", "lo", " from", " upstream"];
  }
});

describe("OpenAI-HTTP backends", () => {
  test("models come from the upstream's /v1/models; one is retrieved by id, an unknown one is a 404", async () => {
    expect((await t.client.models.list()).data.map((m) => m.id)).toEqual(["upstream-model"]);
    expect(await t.client.models.retrieve("upstream-model")).toMatchObject({ id: "upstream-model", object: "model" });
    expect(await t.client.models.retrieve("org/nope").catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("non-streaming passthrough, body forwarded verbatim", async () => {
    const r = await t.client.chat.completions.create({ model: "upstream-model", messages, temperature: 0.5, user: "u1" });
    expect(r.choices[0]!.message.content).toBe("Hello from upstream");
    const sent = JSON.parse([...a.bodies, ...b.bodies].at(-1)!);
    expect(sent).toMatchObject({ model: "upstream-model", temperature: 0.5, user: "u1" });
  });

  test("n and best_of go to the upstream as sent (vLLM generates and ranks the choices itself)", async () => {
    const sent = () => [...a.bodies, ...b.bodies].map((x) => JSON.parse(x) as Record<string, unknown>);
    await t.client.chat.completions.create({ model: "upstream-model", messages, n: 3, user: "n-3" });
    expect(sent().find((x) => x.user === "n-3")).toMatchObject({ n: 3 });
    await t.client.completions.create({ model: "upstream-model", prompt: "x", n: 2, best_of: 4, user: "best-of-4" });
    expect(sent().find((x) => x.user === "best-of-4")).toMatchObject({ n: 2, best_of: 4 });
  });

  test("streaming passthrough with include_usage, re-framed exactly", async () => {
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "upstream-model", messages, stream: true, stream_options: { include_usage: true } }),
    });
    const text = await res.text();
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const frames = text.split("\n\n").slice(0, -2).map((f) => JSON.parse(f.slice(6)));
    expect(frames.map((f) => f.choices[0]?.delta?.content ?? "").join("")).toBe("Hello from upstream");
    expect(frames.at(-1).usage.completion_tokens).toBe(4);
    const s = await t.client.completions.create({ model: "upstream-model", prompt: "x", stream: true });
    let out = "";
    for await (const c of s) out += c.choices[0]?.text ?? "";
    expect(out).toBe("Hello from upstream");
  });

  test("round-robin spreads requests over both upstreams", async () => {
    const before = a.bodies.length + b.bodies.length;
    const aBefore = a.bodies.length;
    for (let i = 0; i < 6; i++) await t.client.chat.completions.create({ model: "upstream-model", messages });
    expect(a.bodies.length + b.bodies.length - before).toBe(6);
    expect(a.bodies.length - aBefore).toBe(3);
  });

  test("a 503 before the first token is retried on the other upstream", async () => {
    a.failStatus = 503;
    a.failCount = 5;
    b.failStatus = 503;
    b.failCount = 0;
    for (let i = 0; i < 4; i++) {
      const s = await t.client.chat.completions.create({ model: "upstream-model", messages, stream: true });
      let text = "";
      for await (const c of s) text += c.choices[0]?.delta.content ?? "";
      expect(text).toBe("Hello from upstream");
    }
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/dispatch_gateway_retries_total\{backend="a"\} [1-9]/);
    a.failCount = 0;
    await t.gw.health.checkNow();
  });

  test("upstream 4xx errors pass through with their status and message", async () => {
    a.failStatus = b.failStatus = 422;
    a.failCount = b.failCount = 1;
    try {
      await t.client.chat.completions.create({ model: "upstream-model", messages });
      throw new Error("expected an error");
    } catch (err) {
      expect(err).toBeInstanceOf(APIError);
      expect((err as APIError).status).toBe(422);
      expect((err as APIError).message).toContain("injected 422");
    }
  });

  test("an upstream stream cut before [DONE] ends with one SSE error event", async () => {
    a.dropAfter = b.dropAfter = 2;
    const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "upstream-model", messages, stream: true }) });
    const text = await res.text();
    const frames = text.split("\n\n").filter(Boolean);
    expect(frames.length).toBe(3);
    expect(JSON.parse(frames[2]!.slice(6)).error.code).toBe("upstream_error");
  });

  test("client abort mid-stream cancels the upstream request within 100 ms", async () => {
    for (const f of [a, b]) {
      f.pieces = Array.from({ length: 200 }, (_, i) => `w${i} `);
      f.delayMs = 10;
    }
    const before = a.cancels.length + b.cancels.length;
    const stream = await t.client.chat.completions.create({ model: "upstream-model", messages, stream: true });
    const abortedAt = await abortAtChunk(stream, 4);
    await waitUntil(() => a.cancels.length + b.cancels.length !== before, 1000);
    const cancels = [...a.cancels, ...b.cancels];
    expect(cancels.length).toBe(before + 1);
    const ms = Math.max(...cancels) - abortedAt;
    expect(ms).toBeLessThan(100);
    console.log(`OpenAI-HTTP upstream saw the cancel ${ms.toFixed(1)} ms after the client aborted`);
  });
});
