/**
 * The official openai client drives the gateway in front of a fake dispatch
 * model server speaking the real proto over Connect.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { encodeBytes } from "./fakes/test-model";
import { startGateway, type TestGateway } from "./start-gateway";
import { abortAtChunk, waitUntil } from "./stream-abort";

let fake: ConnectFake;
let t: TestGateway;

beforeAll(async () => {
  fake = await startConnectFake();
  t = await startGateway({ backends: [{ kind: "dispatch", url: fake.url }], logging: { requests: true } });
});
afterAll(async () => {
  await t.stop();
  fake.stop();
});
afterEach(() => {
  fake.reply = "Hello, world!";
  fake.tokenDelayMs = 0;
  fake.failBeforeFirst = 0;
  fake.failAfterTokens = -1;
});

const messages = [
  { role: "system" as const, content: "Be brief." },
  { role: "user" as const, content: [{ type: "text" as const, text: "Say hello" }] },
];

describe("chat completions through a dispatch backend", () => {
  test("non-streaming: text, finish reason, usage and the token ids the server got", async () => {
    const r = await t.client.chat.completions.create({ model: "fake-moe", messages, max_tokens: 100, temperature: 0, seed: 7 });
    expect(r.object).toBe("chat.completion");
    expect(r.choices[0]!.message.content).toBe("Hello, world!");
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const rendered = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nSay hello<|im_end|>\n<|im_start|>assistant\n";
    const ids = rendered.split(/(<\|im_start\|>|<\|im_end\|>)/).flatMap((p) => (p === "<|im_start|>" ? [257] : p === "<|im_end|>" ? [258] : encodeBytes(p)));
    const got = fake.requests.at(-1)!;
    expect(got.promptTokenIds).toEqual(ids);
    expect(got.stop?.maxTokens).toBe(100);
    expect(got.sampling?.temperature).toBe(0);
    expect(got.sampling?.seed).toBe(7n);
    expect(r.usage).toMatchObject({ prompt_tokens: ids.length, completion_tokens: 14, total_tokens: ids.length + 14 });
  });

  test("streaming: role first, deltas, finish, [DONE] in OpenAI framing", async () => {
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "", refusal: null });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("Hello, world!");
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop");
    for (const c of chunks) {
      expect(c.object).toBe("chat.completion.chunk");
      expect(c.id).toBe(chunks[0]!.id);
      expect(c.model).toBe("fake-moe");
      expect(c.choices[0]!.logprobs).toBeNull();
    }
  });

  test("raw SSE bytes: every frame is `data: {...}\\n\\n`, the last is `data: [DONE]\\n\\n`", async () => {
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "fake-moe", messages, stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const text = await res.text();
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const frames = text.split("\n\n").slice(0, -1);
    for (const f of frames) expect(f.startsWith("data: ")).toBe(true);
    const objs = frames.slice(0, -1).map((f) => JSON.parse(f.slice(6)));
    const usage = objs.at(-1);
    expect(usage.choices).toEqual([]);
    expect(usage.usage.completion_tokens).toBe(14);
    for (const o of objs.slice(0, -1)) expect(o.usage).toBeNull();
  });

  test("include_usage through the client", async () => {
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true, stream_options: { include_usage: true } });
    let usage;
    for await (const c of stream) if (c.usage) usage = c.usage;
    expect(usage).toMatchObject({ completion_tokens: 14 });
  });

  test("a stop string spanning several tokens is caught and the server call is cancelled", async () => {
    fake.reply = "one two three four five six seven eight nine ten";
    fake.tokenDelayMs = 2;
    const cancelsBefore = fake.cancels.length;
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true, stop: ["xyz", "ree fo"] });
    let text = "";
    let finish;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? "";
      finish ??= c.choices[0]?.finish_reason;
    }
    expect(text).toBe("one two th");
    expect(finish).toBe("stop");
    await Bun.sleep(50);
    expect(fake.cancels.length).toBe(cancelsBefore + 1);
    const r = await t.client.chat.completions.create({ model: "fake-moe", messages, stop: "four" });
    expect(r.choices[0]!.message.content).toBe("one two three ");
  });

  test("multi-byte characters split across tokens are never emitted half", async () => {
    fake.reply = "héllo 🌍 wörld ✓";
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
    const parts: string[] = [];
    for await (const c of stream) parts.push(c.choices[0]?.delta.content ?? "");
    for (const p of parts) expect(p.includes("\uFFFD")).toBe(false);
    expect(parts.join("")).toBe("héllo 🌍 wörld ✓");
  });

  test("max_tokens ends with finish_reason length", async () => {
    const r = await t.client.chat.completions.create({ model: "fake-moe", messages, max_completion_tokens: 5 });
    expect(r.choices[0]!.message.content).toBe("Hello");
    expect(r.choices[0]!.finish_reason).toBe("length");
  });

  test("client abort mid-stream cancels the model server call within 100 ms", async () => {
    fake.reply = "x".repeat(400);
    fake.tokenDelayMs = 10;
    const before = fake.cancels.length;
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
    const abortedAt = await abortAtChunk(stream, 5);
    await waitUntil(() => fake.cancels.length !== before, 1000);
    expect(fake.cancels.length).toBe(before + 1);
    const ms = fake.cancels.at(-1)! - abortedAt;
    expect(ms).toBeLessThan(100);
    console.log(`dispatch backend saw the cancel ${ms.toFixed(1)} ms after the client aborted`);
  });

  test("a failure after the first token ends the stream with one SSE error event", async () => {
    fake.failAfterTokens = 3;
    const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", messages, stream: true }) });
    expect(res.status).toBe(200);
    const text = await res.text();
    const frames = text.split("\n\n").filter(Boolean);
    const last = JSON.parse(frames.at(-1)!.slice(6));
    expect(last.error).toMatchObject({ type: "server_error", code: "upstream_error" });
    expect(text.includes("[DONE]")).toBe(false);
    // The client sees it as an error too.
    fake.failAfterTokens = 3;
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
    await expect((async () => { for await (const _ of stream); })()).rejects.toThrow();
    // Two streams broken mid-way in a row (unhealthy_after 2) eject the server; a good probe brings it back.
    expect(t.gw.pool.get("dispatch-0")!.healthy).toBe(false);
    await t.gw.health.checkNow();
    expect(t.gw.pool.get("dispatch-0")!.healthy).toBe(true);
  });

  test("text completions, streaming and not", async () => {
    const r = await t.client.completions.create({ model: "fake-moe", prompt: "Once upon", max_tokens: 50 });
    expect(r.object).toBe("text_completion");
    expect(r.choices[0]!.text).toBe("Hello, world!");
    expect(fake.requests.at(-1)!.promptTokenIds).toEqual(encodeBytes("Once upon"));
    const s = await t.client.completions.create({ model: "fake-moe", prompt: [1, 2, 3], stream: true, stream_options: { include_usage: true } });
    let text = "";
    let usage;
    for await (const c of s) {
      text += c.choices[0]?.text ?? "";
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe("Hello, world!");
    expect(usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 14 });
  });

  test("models, health, readiness, metrics", async () => {
    const models = await t.client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["fake-moe"]);
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${t.url}/readyz`);
    expect(ready.status).toBe(200);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toContain('dispatch_gateway_requests_total{endpoint="chat",status="200",stream="true"}');
    expect(metrics).toContain('dispatch_gateway_backend_healthy{backend="dispatch-0",kind="dispatch"} 1');
  });

  test("request logs are JSON and carry no prompt text", async () => {
    await t.client.chat.completions.create({ model: "fake-moe", messages: [{ role: "user", content: "secret-prompt-text" }] });
    t.gw.log.flush();
    const lines = t.logs.map((l) => JSON.parse(l));
    expect(lines.some((l) => l.msg === "request" && l.status === 200)).toBe(true);
    expect(t.logs.join("\n")).not.toContain("secret-prompt-text");
  });
});
