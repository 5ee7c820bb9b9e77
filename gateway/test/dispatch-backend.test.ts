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
  fake.replyFor = null;
  fake.failOnCall = -1;
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

  test("continue_final_message leaves the assistant's turn open (vLLM's extension; chat_template_kwargs accepted)", async () => {
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "fake-moe", messages: [{ role: "user", content: "Say hello" }, { role: "assistant", content: "Hel" }], continue_final_message: true, chat_template_kwargs: { enable_thinking: false } }),
    });
    expect(res.status).toBe(200);
    const ids = fake.requests.at(-1)!.promptTokenIds;
    // the assistant's turn left open after its text: no <|im_end|> (258) after "Hel", no new assistant turn
    expect(ids.slice(-4)).toEqual(encodeBytes("\nHel"));
    expect(ids.filter((id) => id === 257).length).toBe(2);
  });

  test("priority (vLLM's) goes to the model server; out of int32 it is a 400", async () => {
    const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", messages, priority: -5 }) });
    expect(res.status).toBe(200);
    expect(fake.requests.at(-1)!.priority).toBe(-5);
    const bad = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", messages, priority: 2 ** 31 }) });
    expect(bad.status).toBe(400);
  });

  test("logit_bias goes to the model server as its map", async () => {
    await t.client.chat.completions.create({ model: "fake-moe", messages, logit_bias: { "72": 100, "7": -2.5 } });
    expect(fake.requests.at(-1)!.sampling!.logitBias).toEqual({ 72: 100, 7: -2.5 });
    await t.client.chat.completions.create({ model: "fake-moe", messages });
    expect(fake.requests.at(-1)!.sampling!.logitBias).toEqual({});
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

  test("echo: the prompt opens the text, streamed and not; with logprobs it is refused (no prompt log-probabilities)", async () => {
    const r = await t.client.completions.create({ model: "fake-moe", prompt: "Once upon", echo: true, max_tokens: 50 });
    expect(r.choices[0]!.text).toBe("Once uponHello, world!");
    const ids = await t.client.completions.create({ model: "fake-moe", prompt: [72, 105, 32], echo: true, n: 2, max_tokens: 50 });
    expect(ids.choices.map((c) => c.text)).toEqual(["Hi Hello, world!", "Hi Hello, world!"]);
    const s = await t.client.completions.create({ model: "fake-moe", prompt: "Once upon", echo: true, stream: true });
    const parts: string[] = [];
    for await (const c of s) parts.push(c.choices[0]?.text ?? "");
    expect(parts[0]).toBe("Once upon");
    expect(parts.join("")).toBe("Once uponHello, world!");
    const res = await fetch(`${t.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", prompt: "x", echo: true, logprobs: 1 }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe("echo");
  });

  test("/tokenize and /detokenize (vLLM's extensions) with the model's own tokenizer and template", async () => {
    const post = async (path: string, body: object) => {
      const res = await fetch(`${t.url}${path}`, { method: "POST", body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    expect((await post("/tokenize", { model: "fake-moe", prompt: "Hi" })).body).toEqual({ count: 2, max_model_len: 4096, tokens: [72, 105] });
    const chat = await post("/tokenize", { model: "fake-moe", messages: [{ role: "user", content: "Hi" }] });
    expect(chat.body.tokens).toEqual([257, ...encodeBytes("user\nHi"), 258, ...encodeBytes("\n"), 257, ...encodeBytes("assistant\n")]);
    expect((await post("/detokenize", { model: "fake-moe", tokens: [72, 105, 258] })).body).toEqual({ prompt: "Hi" });
    for (const [path, body, status, param] of [
      ["/tokenize", { model: "nope", prompt: "x" }, 404, "model"],
      ["/tokenize", { model: "fake-moe" }, 400, "prompt"],
      ["/detokenize", { model: "fake-moe", tokens: [1, 99999] }, 400, "tokens"],
      ["/detokenize", { model: "fake-moe" }, 400, "tokens"],
    ] as const) {
      const r = await post(path, body);
      expect([r.status, r.body.error?.param]).toEqual([status, param]);
    }
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

describe("several choices (n) through a dispatch backend", () => {
  const bySeed = (req: { sampling?: { seed?: bigint } }) => `seed ${req.sampling?.seed ?? "none"}`;

  test("non-streaming: n sequences on the server, choice 0 first, seeds seed + i, one body with every choice", async () => {
    const sentAt: number[] = [];
    fake.replyFor = (req) => (sentAt.push(performance.now()), bySeed(req));
    fake.tokenDelayMs = 15;
    const before = fake.requests.length;
    const r = await t.client.chat.completions.create({ model: "fake-moe", messages, n: 3, seed: 41, temperature: 1 });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(r.choices.map((c) => c.message.content)).toEqual(["seed 41", "seed 42", "seed 43"]);
    for (const c of r.choices) expect(c.finish_reason).toBe("stop");
    const got = fake.requests.slice(before);
    expect(got.length).toBe(3);
    expect(got[0]!.requestId).toBe(r.id);
    expect(new Set(got.map((g) => g.requestId)).size).toBe(3);
    // choices 1 and 2 go out once choice 0's first token is back (its prompt's blocks are then in the server's cache)
    expect(Math.min(sentAt[1]!, sentAt[2]!) - sentAt[0]!).toBeGreaterThanOrEqual(12);
    const prompt = got[0]!.promptTokenIds.length;
    // the prompt once, the completion tokens of all three (7 tokens + EOS each)
    expect(r.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: 24, total_tokens: prompt + 24 });
  });

  test("streaming chat: every choice's role, text and finish under its index; one usage chunk; [DONE] once", async () => {
    fake.replyFor = bySeed;
    fake.tokenDelayMs = 1;
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, n: 2, seed: 7, temperature: 1, stream: true, stream_options: { include_usage: true } });
    const text = ["", ""];
    const roles = [0, 0];
    const finish: (string | null)[] = [null, null];
    let usageChunks = 0;
    let usage;
    for await (const c of stream) {
      if (c.usage) {
        usageChunks++;
        usage = c.usage;
        expect(c.choices).toEqual([]);
      }
      for (const ch of c.choices) {
        if (ch.delta.role) roles[ch.index]!++;
        text[ch.index] += ch.delta.content ?? "";
        if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
      }
    }
    expect(text).toEqual(["seed 7", "seed 8"]);
    expect(roles).toEqual([1, 1]);
    expect(finish).toEqual(["stop", "stop"]);
    expect(usageChunks).toBe(1);
    expect(usage).toMatchObject({ completion_tokens: 14 });
  });

  test("streaming completions, raw SSE: frames of both indexes, one [DONE] at the end", async () => {
    fake.replyFor = bySeed;
    const res = await fetch(`${t.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", prompt: [1, 2, 3], n: 2, seed: 0, stream: true }) });
    const body = await res.text();
    expect(body.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(body.split("data: [DONE]").length).toBe(2);
    const frames = body.split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6)));
    const text = ["", ""];
    for (const f of frames) for (const ch of f.choices) text[ch.index] += ch.text;
    expect(text).toEqual(["seed 0", "seed 1"]);
  });

  test("a batch of prompts (completions): each prompt's choices in turn, index = prompt x n + choice, usage of all", async () => {
    fake.replyFor = (req) => `${new TextDecoder().decode(Uint8Array.from(req.promptTokenIds))}/${req.sampling?.seed ?? "-"}`;
    const before = fake.requests.length;
    const r = await t.client.completions.create({ model: "fake-moe", prompt: ["ab", "cde"], n: 2, seed: 3 });
    expect(r.choices.map((c) => [c.index, c.text])).toEqual([
      [0, "ab/3"],
      [1, "ab/4"],
      [2, "cde/3"],
      [3, "cde/4"],
    ]);
    expect(fake.requests.length - before).toBe(4);
    // prompts 2 + 3 tokens; completions 4 + 4 + 5 + 5 characters, each with its EOS
    expect(r.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 22, total_tokens: 27 });
    // streamed, the same choices under the same indexes
    const res = await fetch(`${t.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", prompt: [[104, 105], "yo"], seed: 0, stream: true, stream_options: { include_usage: true } }) });
    const frames = (await res.text()).split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6)));
    const text = ["", ""];
    for (const f of frames) for (const ch of f.choices) text[ch.index] += ch.text;
    expect(text).toEqual(["hi/0", "yo/0"]);
    expect(frames.at(-1).usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 10 });
  });

  test("a choice refused before its first token: the request fails cleanly and the other choices are cancelled", async () => {
    fake.reply = "x".repeat(200);
    fake.tokenDelayMs = 5;
    const cancels = fake.cancels.length;
    fake.failOnCall = fake.generateCalls + 2; // choice 1
    const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", messages, n: 3, stream: true }) });
    expect(res.status).toBe(503);
    const err = (await res.json()) as { error: { message: string; type: string; code: string | null } };
    expect(typeof err.error.message).toBe("string");
    // choices 0 and 2 were running: both cancelled upstream
    await waitUntil(() => fake.cancels.length >= cancels + 2, 1000);
    expect(fake.cancels.length).toBe(cancels + 2);
  });

  test("client abort mid-stream cancels every choice's call", async () => {
    fake.reply = "x".repeat(400);
    fake.tokenDelayMs = 5;
    const before = fake.cancels.length;
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, n: 3, stream: true });
    await abortAtChunk(stream, 10);
    await waitUntil(() => fake.cancels.length >= before + 3, 1000);
    expect(fake.cancels.length).toBe(before + 3);
  });

  test("n out of range, best_of below n: 400 naming the parameter; best_of above n: unsupported here", async () => {
    for (const [body, param] of [
      [{ model: "fake-moe", messages, n: 129 }, "n"],
      [{ model: "fake-moe", messages, n: 0 }, "n"],
      [{ model: "fake-moe", prompt: "x", n: 3, best_of: 2 }, "best_of"],
      [{ model: "fake-moe", prompt: "x", n: 2, best_of: 4 }, "best_of"],
    ] as const) {
      const path = "messages" in body ? "chat/completions" : "completions";
      const res = await fetch(`${t.url}/v1/${path}`, { method: "POST", body: JSON.stringify(body) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { param: string } }).error.param).toBe(param);
    }
  });
  test("a failure after the first tokens ends the merged stream with one SSE error event", async () => {
    fake.failAfterTokens = 3;
    const res = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", messages, n: 2, stream: true }) });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.match(/"error":/g)?.length).toBe(1);
    expect(text).not.toContain("[DONE]");
    await t.gw.health.checkNow(); // a stream broken mid-way counts against the server's health
  });

});
