import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { FinishReason } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { ServingStatus } from "@dispatch/proto/gen/dispatch/v1/health_pb";
import type { KvEventBatch } from "@dispatch/proto/gen/dispatch/v1/kv_events_pb";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { createEngine, type Engine } from "../engine/engine";
import { createToyRunner, toyContinuation } from "../engine/testing/toy-runner";
import { startRpcServer, type RpcServer } from "./server";
import { createServingState, type ModelMeta } from "./serving-state";

const V = 64;
const meta: ModelMeta = {
  tokenizer: {
    pattern: "\\S+|\\s+",
    ranks: new TextEncoder().encode(Array.from({ length: V - 1 }, (_, i) => `${btoa(String.fromCharCode(97 + (i % 26)) + i)} ${i}`).join("\n")),
    specialTokens: { "<eos>": V - 1 },
  },
  chatTemplate: "{% for m in messages %}{{ m.content }}{% endfor %}",
  bosToken: "",
  eosToken: "<eos>",
};

let server: RpcServer;
let engine: Engine;
let client: Client<typeof ModelService>;
const state = createServingState();

beforeAll(async () => {
  server = await startRpcServer({ state, host: "127.0.0.1", port: 0, grpcPort: 0 });
  client = createClient(ModelService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: true }));
});
afterAll(async () => {
  await engine?.close();
  await server.stop();
});

describe("rpc before the model is loaded", () => {
  test("health says NOT_SERVING, readyz 503, generate UNAVAILABLE", async () => {
    state.setLoading("loading weights 40%");
    const h = await client.health({});
    expect(h.status).toBe(ServingStatus.NOT_SERVING);
    expect(h.message).toContain("40%");
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);
    const err = await ConnectError.from(await client.getModelInfo({}).catch((e) => e));
    expect(err.code).toBe(Code.Unavailable);
  });
});

describe("rpc serving (toy runner)", () => {
  beforeAll(() => {
    engine = createEngine({
      runner: createToyRunner({ vocabSize: V, stepDelayMs: 1, maxContext: 256 }),
      blockSize: 4,
      numKvBlocks: 64,
      maxNumSeqs: 2,
      maxBatchTokens: 64,
      maxQueue: 2,
      serverId: "ms-test",
      onStep: (s) => server.metrics.engine.step(s),
      tokenBytes: (id) => new TextEncoder().encode(String.fromCharCode(97 + (id % 26))),
    });
    state.setServing(engine, meta);
  });

  test("health, readyz, metrics and model info", async () => {
    expect((await client.health({})).status).toBe(ServingStatus.SERVING);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain("dispatch_ms_kv_blocks_total 64");
    const info = await client.getModelInfo({});
    expect(info.modelId).toBe("toy");
    expect(info.blockSize).toBe(4);
    expect(info.maxContext).toBe(256);
    expect(info.serverId).toBe("ms-test");
    expect(info.tokenizer?.kind).toBe("tiktoken");
    expect(info.tokenizer?.ranks).toEqual(meta.tokenizer.ranks);
    expect(info.tokenizer?.specialTokens).toEqual({ "<eos>": 63 });
    expect(info.chatTemplate).toBe(meta.chatTemplate);
    expect(info.eosTokenIds).toEqual([63]);
    expect(info.backend).toBe("cpu");
  });

  test("generate streams tokens, text and a final usage", async () => {
    const prompt = [1, 2, 3, 4, 5, 6];
    const tokens: number[] = [];
    let text = "";
    let last;
    for await (const r of client.generate({ promptTokenIds: prompt, stop: { maxTokens: 9 }, returnText: true, topLogprobs: 2 })) {
      tokens.push(...r.tokenIds);
      text += r.textDelta;
      last = r;
    }
    expect(tokens).toEqual(toyContinuation(prompt, 9, V));
    expect(text.length).toBe(9);
    expect(last!.finishReason).toBe(FinishReason.LENGTH);
    expect(last!.usage).toMatchObject({ promptTokens: 6, completionTokens: 9, cachedPromptTokens: 0 });
    expect(last!.logprobs[0]!.topTokenIds.length).toBe(2);
  });

  test("logit_bias decides greedy tokens over the wire", async () => {
    const tokens: number[] = [];
    for await (const r of client.generate({ promptTokenIds: [9, 8, 7], sampling: { temperature: 0, logitBias: { 5: 100 } }, stop: { maxTokens: 6 } })) tokens.push(...r.tokenIds);
    expect(tokens).toEqual([5, 5, 5, 5, 5, 5]);
  });

  test("gRPC (h2c) and gRPC-web reach the same service", async () => {
    const grpc = createClient(ModelService, createGrpcTransport({ baseUrl: server.grpcUrl! }));
    const web = createClient(ModelService, createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    for (const c of [grpc, web]) {
      const tokens: number[] = [];
      for await (const r of c.generate({ promptTokenIds: [9, 8, 7], stop: { maxTokens: 4 } })) tokens.push(...r.tokenIds);
      expect(tokens).toEqual(toyContinuation([9, 8, 7], 4, V));
    }
  });

  test("bad arguments are INVALID_ARGUMENT; a full queue RESOURCE_EXHAUSTED at once", async () => {
    const codeOf = async (p: Parameters<typeof client.generate>[0]) => {
      try {
        for await (const _ of client.generate(p));
      } catch (e) {
        return ConnectError.from(e).code;
      }
      return null;
    };
    expect(await codeOf({ promptTokenIds: [] })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: new Array(300).fill(1) })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: [1], sampling: { temperature: -0.5 } })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: [1], model: "other-model" })).toBe(Code.InvalidArgument);
    // logit_bias: an id past the vocabulary, a bias past 100
    expect(await codeOf({ promptTokenIds: [1], sampling: { logitBias: { [V]: 1 } } })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: [1], sampling: { logitBias: { 2: 101 } } })).toBe(Code.InvalidArgument);
    expect(await codeOf({ promptTokenIds: [1], priority: 7, stop: { maxTokens: 2 } })).toBeNull();

    // maxNumSeqs 2 running + maxQueue 2 waiting: the fifth is refused without waiting.
    const ctl = new AbortController();
    const busy: Promise<void>[] = [];
    for (let n = 1; n <= 4; n++) {
      const it = client.generate({ promptTokenIds: [1, 2, 3], stop: { maxTokens: 1000 } }, { signal: ctl.signal });
      busy.push(
        (async () => {
          try {
            for await (const _ of it);
          } catch {}
        })(),
      );
      for (let i = 0; i < 400 && engine.load().running + engine.load().waiting < n; i++) await Bun.sleep(1);
    }
    expect(engine.load().waiting).toBe(2);
    const t0 = performance.now();
    expect(await codeOf({ promptTokenIds: [1, 2, 3] })).toBe(Code.ResourceExhausted);
    expect(performance.now() - t0).toBeLessThan(1000);
    ctl.abort();
    await Promise.all(busy);
  });

  test("cancelling the stream frees the sequence's blocks (seen through WatchLoad)", async () => {
    const ctl = new AbortController();
    let got = 0;
    try {
      for await (const r of client.generate({ promptTokenIds: [5, 6, 7, 8, 9], stop: { maxTokens: 1000 } }, { signal: ctl.signal })) {
        got += r.tokenIds.length;
        if (got >= 3) ctl.abort();
      }
    } catch (e) {
      expect(ConnectError.from(e).code).toBe(Code.Canceled);
    }
    const watch = new AbortController();
    let freed = false;
    for await (const r of client.watchLoad({ intervalMs: 10 }, { signal: watch.signal })) {
      expect(r.serverId).toBe("ms-test");
      expect(r.kvBlocksTotal).toBe(64);
      if (r.running === 0 && r.kvBlocksUsed === 0) {
        freed = true;
        break;
      }
    }
    watch.abort();
    expect(freed).toBe(true);
  });

  test("WatchKvEvents starts with a snapshot, then live stored events with the block size", async () => {
    const watch = new AbortController();
    const it = client.watchKvEvents({ snapshot: true }, { signal: watch.signal })[Symbol.asyncIterator]();
    const first = (await it.next()).value!;
    expect(first.snapshot).toBe(true);
    expect(first.sequence).toBe(1n);
    expect(first.blockSize).toBe(4);
    expect(first.serverId).toBe("ms-test");
    // A new prompt stores new blocks.
    for await (const _ of client.generate({ promptTokenIds: [40, 41, 42, 43, 44, 45, 46, 47, 48], stop: { maxTokens: 2 } }));
    let stored = false;
    for (let i = 0; i < 20 && !stored; i++) {
      const b: KvEventBatch = (await it.next()).value!;
      stored = !b.snapshot && b.events.some((e) => e.event.case === "stored");
    }
    expect(stored).toBe(true);
    watch.abort();
    await it.return?.();
  });

  test("event metrics: outcomes, TTFT and step times reach /metrics", async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/dispatch_ms_requests_total\{outcome="ok"\} [1-9]/);
    expect(text).toMatch(/dispatch_ms_requests_total\{outcome="invalid_argument"\} [1-9]/);
    expect(text).toMatch(/dispatch_ms_requests_total\{outcome="resource_exhausted"\} [1-9]/);
    expect(text).toMatch(/dispatch_ms_requests_total\{outcome="cancelled"\} [1-9]/);
    expect(text).toMatch(/dispatch_ms_time_to_first_token_seconds_count [1-9]/);
    expect(text).toMatch(/dispatch_ms_generation_tokens_total [1-9]/);
    expect(text).toMatch(/dispatch_ms_step_duration_seconds_count [1-9]/);
  });
});

describe("a model step that never returns (a stuck device)", () => {
  test("the stream ends with ERROR, then the server reports failed: health NOT_SERVING, /healthz 500, /readyz 503, Generate UNAVAILABLE", async () => {
    const stuckState = createServingState();
    const srv = await startRpcServer({ state: stuckState, host: "127.0.0.1", port: 0 });
    const c = createClient(ModelService, createConnectTransport({ baseUrl: srv.url, httpVersion: "1.1", useBinaryFormat: true }));
    // steps 0 and 1 run (prefill, one decode), step 2 never returns
    const stuck = createEngine({
      runner: createToyRunner({ vocabSize: V, maxContext: 256, stuckFromStep: 2 }),
      blockSize: 4,
      numKvBlocks: 64,
      maxNumSeqs: 2,
      maxBatchTokens: 64,
      maxQueue: 2,
      serverId: "stuck",
      tokenBytes: (id) => new TextEncoder().encode(String.fromCharCode(97 + (id % 26))),
      stepTimeoutMs: 150,
      onStalled: (m) => stuckState.setFailed(m),
    });
    try {
      stuckState.setServing(stuck, meta);
      const prompt = [5, 6, 7, 8];
      const tokens: number[] = [];
      let finish: FinishReason | undefined;
      for await (const r of c.generate({ promptTokenIds: prompt, stop: { maxTokens: 50 } })) {
        tokens.push(...r.tokenIds);
        if (r.finishReason !== FinishReason.UNSPECIFIED) finish = r.finishReason;
      }
      expect(finish).toBe(FinishReason.ERROR);
      expect(tokens).toEqual(toyContinuation(prompt, tokens.length, V));
      expect(tokens.length).toBeGreaterThan(0);
      const h = await c.health({});
      expect(h.status).toBe(ServingStatus.NOT_SERVING);
      expect(h.message).toContain("is stuck");
      expect((await fetch(`${srv.url}/healthz`)).status).toBe(500);
      expect((await fetch(`${srv.url}/readyz`)).status).toBe(503);
      const err = await ConnectError.from(await (async () => {
        for await (const _ of c.generate({ promptTokenIds: prompt, stop: { maxTokens: 2 } }));
      })().catch((e) => e));
      expect(err.code).toBe(Code.Unavailable);
    } finally {
      await stuck.close();
      await srv.stop();
    }
  });
});
