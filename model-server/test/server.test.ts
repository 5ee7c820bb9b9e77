/**
 * End to end: the real model server process with the bundled model, driven
 * through a Connect client the way the gateway drives it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { Template } from "@huggingface/jinja";
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { FinishReason, type GenerateResponse } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { ServingStatus } from "@dispatch/proto/gen/dispatch/v1/health_pb";
import type { KvEventBatch } from "@dispatch/proto/gen/dispatch/v1/kv_events_pb";
import type { ModelInfo } from "@dispatch/proto/gen/dispatch/v1/model_info_pb";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GenerateRequestSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { Tiktoken } from "tiktoken";
import { bundledModelDir, startServer, type RunningServer } from "./harness";

type Req = MessageInitShape<typeof GenerateRequestSchema>;

let server: RunningServer;
let client: Client<typeof ModelService>;
let info: ModelInfo;
let tk: Tiktoken;
let template: Template;

function chat(question: string): number[] {
  const text = template.render({ messages: [{ role: "user", content: question }], add_generation_prompt: true, bos_token: info.bosToken, eos_token: info.eosToken });
  return Array.from(tk.encode(text, "all"));
}

async function run(req: Req, signal?: AbortSignal) {
  const tokens: number[] = [];
  let text = "";
  let last: GenerateResponse | null = null;
  for await (const r of client.generate(req, { signal })) {
    tokens.push(...r.tokenIds);
    text += r.textDelta;
    last = r;
  }
  if (!last) throw new Error("empty stream");
  return { tokens, text, last };
}

async function codeOf(req: Req): Promise<Code | null> {
  try {
    await run(req);
    return null;
  } catch (e) {
    return ConnectError.from(e).code;
  }
}

beforeAll(async () => {
  server = await startServer({ model: bundledModelDir(), args: ["--max-num-seqs", "4", "--max-queue", "2", "--block-size", "16", "--grpc-port", "0"] });
  client = createClient(ModelService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: true }));
  info = await client.getModelInfo({});
  tk = new Tiktoken(new TextDecoder().decode(info.tokenizer!.ranks), info.tokenizer!.specialTokens, info.tokenizer!.pattern);
  template = new Template(info.chatTemplate);
});

afterAll(async () => {
  tk?.free();
  if (server) expect(await server.stop()).toBe(0);
});

describe("model server end to end (bundled model)", () => {
  test("health and model info: tokenizer, chat template, block size, context", async () => {
    expect((await client.health({})).status).toBe(ServingStatus.SERVING);
    expect(info.tokenizer!.kind).toBe("tiktoken");
    expect(info.tokenizer!.pattern.length).toBeGreaterThan(0);
    expect(info.tokenizer!.ranks.length).toBeGreaterThan(1000);
    expect(Object.keys(info.tokenizer!.specialTokens).length).toBeGreaterThan(0);
    expect(info.chatTemplate).toContain("messages");
    expect(info.blockSize).toBe(16);
    expect(info.maxContext).toBeGreaterThan(16);
    expect(info.vocabSize).toBeGreaterThan(0);
    expect(info.eosTokenIds.length).toBeGreaterThan(0);
    expect(info.backend).toBe("cpu");
    // The tokenizer round-trips text.
    const s = "The quick brown fox jumps over the lazy dog.";
    expect(new TextDecoder().decode(tk.decode(tk.encode(s)))).toBe(s);
  });

  test("the gRPC protocol over h2c and gRPC-web serve the same model", async () => {
    const grpcUrl = server.output().match(/gRPC h2c at (http:\/\/\S+?)\)/)?.[1];
    expect(grpcUrl).toBeDefined();
    const prompt = chat("What is a dog?");
    const viaConnect = await run({ promptTokenIds: prompt, stop: { maxTokens: 8, ignoreEos: true } });
    for (const transport of [createGrpcTransport({ baseUrl: grpcUrl! }), createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" })]) {
      const c = createClient(ModelService, transport);
      expect((await c.getModelInfo({})).modelId).toBe(info.modelId);
      const tokens: number[] = [];
      for await (const r of c.generate({ promptTokenIds: prompt, stop: { maxTokens: 8, ignoreEos: true } })) tokens.push(...r.tokenIds);
      expect(tokens).toEqual(viaConnect.tokens);
    }
  });

  test("streams readable text whose deltas match the tokens", async () => {
    const { tokens, text, last } = await run({ promptTokenIds: chat("What does river mean?"), stop: { maxTokens: 40 }, returnText: true });
    expect(tokens.length).toBeGreaterThan(0);
    expect(last.finishReason === FinishReason.STOP || last.finishReason === FinishReason.LENGTH).toBe(true);
    const shown = last.finishReason === FinishReason.STOP ? tokens.slice(0, -1) : tokens;
    expect(text).toBe(new TextDecoder().decode(tk.decode(Uint32Array.from(shown))));
    expect(text).toMatch(/[a-z]{3,}/); // words, not noise
    expect(last.usage!.completionTokens).toBe(tokens.length);
  });

  test("concurrent streams are batched together, and greedy output does not depend on the batch", async () => {
    const prompts = ["What is a telescope?", "Define the verb whisper.", "What is music?", "What does brave mean?"].map(chat);
    const alone = await run({ promptTokenIds: prompts[0]!, stop: { maxTokens: 24, ignoreEos: true } });
    const watch = new AbortController();
    let maxRunning = 0;
    const watching = (async () => {
      try {
        for await (const r of client.watchLoad({ intervalMs: 10 }, { signal: watch.signal })) maxRunning = Math.max(maxRunning, r.running);
      } catch {}
    })();
    const all = await Promise.all(prompts.map((p) => run({ promptTokenIds: p, stop: { maxTokens: 24, ignoreEos: true } })));
    watch.abort();
    await watching;
    expect(maxRunning).toBeGreaterThanOrEqual(2);
    expect(all[0]!.tokens).toEqual(alone.tokens);
    for (const r of all) expect(r.tokens.length).toBe(24);
  });

  test("same seed, same sampled output", async () => {
    const req: Req = { promptTokenIds: chat("What is a harbor?"), sampling: { temperature: 0.9, topP: 0.95, seed: 77n }, stop: { maxTokens: 20, ignoreEos: true } };
    const a = await run(req);
    const [b] = await Promise.all([run(req), run({ ...req, sampling: { temperature: 1, seed: 5n } })]);
    expect(b!.tokens).toEqual(a.tokens);
  });

  test("a cached prompt prefix is reported and its KV events carry the gateway's block hashes", async () => {
    const watch = new AbortController();
    const it = client.watchKvEvents({ snapshot: true }, { signal: watch.signal })[Symbol.asyncIterator]();
    const snap: KvEventBatch = (await it.next()).value!;
    expect(snap.snapshot).toBe(true);
    expect(snap.blockSize).toBe(16);

    const prompt = chat("Tell me, in plain words and at some length, what a lighthouse keeper does all night long by the sea.");
    expect(prompt.length).toBeGreaterThanOrEqual(32);
    await run({ promptTokenIds: prompt, stop: { maxTokens: 4 } });
    const again = await run({ promptTokenIds: prompt, stop: { maxTokens: 4 } });
    const full = Math.floor((prompt.length - 1) / 16) * 16;
    expect(again.last.usage!.cachedPromptTokens).toBe(full);

    const expected = hashBlocks(prompt, 16, rootHash(info.modelId));
    const seen = new Set<bigint>();
    for (let i = 0; i < 50 && !expected.every((h) => seen.has(h)); i++) {
      const b: KvEventBatch = (await it.next()).value!;
      for (const e of b.events) if (e.event.case === "stored") for (const h of e.event.value.blockHashes) seen.add(h);
    }
    for (const h of expected) expect(seen.has(h)).toBe(true);
    watch.abort();
  });

  test("cancelling a stream frees its blocks (seen through WatchLoad)", async () => {
    const ctl = new AbortController();
    let n = 0;
    try {
      for await (const r of client.generate({ promptTokenIds: chat("What is a river?"), stop: { maxTokens: 100000, ignoreEos: true } }, { signal: ctl.signal })) {
        n += r.tokenIds.length;
        if (n >= 3) ctl.abort();
      }
    } catch (e) {
      expect(ConnectError.from(e).code).toBe(Code.Canceled);
    }
    const aborted = performance.now();
    const watch = new AbortController();
    let freedAfter = -1;
    for await (const r of client.watchLoad({ intervalMs: 10 }, { signal: watch.signal })) {
      if (r.running === 0 && r.kvBlocksUsed === 0) {
        freedAfter = performance.now() - aborted;
        break;
      }
    }
    watch.abort();
    // Freed promptly (the stream alone would run to the 1024-token context), and counted as a cancel.
    expect(freedAfter).toBeGreaterThanOrEqual(0);
    expect(freedAfter).toBeLessThan(1000);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/dispatch_ms_requests_total\{outcome="cancelled"\} [1-9]/);
  });

  test("a deadline ends the stream with finish reason DEADLINE_EXCEEDED and usage", async () => {
    const t0 = Date.now();
    const r = await run({ promptTokenIds: chat("What is a river?"), stop: { maxTokens: 100000, ignoreEos: true }, deadlineUnixMs: BigInt(t0 + 200) });
    expect(r.last.finishReason).toBe(FinishReason.DEADLINE_EXCEEDED);
    expect(r.last.usage!.completionTokens).toBe(r.tokens.length);
    expect(Date.now() - t0).toBeLessThan(1500);
  });

  test("bad arguments are INVALID_ARGUMENT; a full queue is RESOURCE_EXHAUSTED at once", async () => {
    expect(await codeOf({ promptTokenIds: [] })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: [info.vocabSize + 5] })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: new Array(info.maxContext + 1).fill(1) })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: [1, 2], sampling: { temperature: -1 } })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: [1, 2], model: "not-this-model" })).toBe(Code.InvalidArgument);

    // 4 running + 2 waiting fill the server (--max-num-seqs 4 --max-queue 2).
    const ctl = new AbortController();
    const busy: Promise<unknown>[] = [];
    const load = async () => {
      for await (const r of client.watchLoad({}, {})) return r;
      throw new Error("no load report");
    };
    for (let i = 0; i < 6; i++) {
      busy.push(run({ promptTokenIds: chat(`Question number ${i}?`), stop: { maxTokens: 100000, ignoreEos: true } }, ctl.signal).catch(() => null));
      for (let k = 0; k < 100; k++) {
        const l = await load();
        if (l.running + l.waiting >= i + 1) break;
        await Bun.sleep(10);
      }
    }
    const t0 = performance.now();
    expect(await codeOf({ promptTokenIds: chat("One more?") })).toBe(Code.ResourceExhausted);
    expect(performance.now() - t0).toBeLessThan(1000);
    ctl.abort();
    await Promise.all(busy);
  });
});

test("bad flags stop the server with a clear message", async () => {
  const p = Bun.spawn([process.execPath, join(import.meta.dir, "..", "src", "main.ts"), "--model", "x", "--port", "nope"], { stdout: "pipe", stderr: "pipe" });
  const err = await new Response(p.stderr).text();
  expect(await p.exited).toBe(2);
  expect(err).toContain('--port must be a whole number, got "nope"');
});

test("a port already in use stops the server with status 1 and a line naming the address, no stack trace", async () => {
  const taken = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
  try {
    const p = Bun.spawn([process.execPath, join(import.meta.dir, "..", "src", "main.ts"), "--model", "x", "--host", "127.0.0.1", "--port", String(taken.port)], { stdout: "pipe", stderr: "pipe" });
    const err = await new Response(p.stderr).text();
    expect(await p.exited).toBe(1);
    expect(err).toContain(`cannot listen on 127.0.0.1:${taken.port}: the port is in use`);
    expect(err).not.toContain("    at ");
  } finally {
    taken.stop(true);
  }
});
