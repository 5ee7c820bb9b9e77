/**
 * A fake dispatch model server implementing the proto over Connect (HTTP/1.1,
 * Bun.serve + createFetchHandler), for tests only. It answers with a scripted
 * reply (one byte-token per message, at a chosen pace) and records what it
 * saw: requests, and when a Generate call was cancelled by the caller.
 */
import { Code, ConnectError, createConnectRouter } from "@connectrpc/connect";
import { createFetchHandler } from "@connectrpc/connect/protocol";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import http2 from "node:http2";
import { type GenerateRequest, FinishReason } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { ServingStatus } from "@dispatch/proto/gen/dispatch/v1/health_pb";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { byteRanks, CHATML, encodeBytes, EOS_ID, PATTERN, SPECIAL_TOKENS } from "./test-model";

export interface ConnectFake {
  url: string;
  /** gRPC over h2c (node:http2), when started with `grpc: true`. */
  grpcUrl: string;
  modelId: string;
  /** Text the next Generate calls answer with. */
  reply: string;
  /** When set, the text each Generate call answers with, from its request (e.g. its seed). */
  replyFor: ((req: GenerateRequest) => string) | null;
  /** Fail the Generate call of this ordinal (generateCalls after it counted, 1-based) before any token; -1: none. */
  failOnCall: number;
  /** Delay before each token message, ms. */
  tokenDelayMs: number;
  /** A single pause of `pauseMs` before token number `pauseAt` (-1: none). */
  pauseAt: number;
  pauseMs: number;
  /** Fail this many Generate calls with `failCode` before any token. */
  failBeforeFirst: number;
  failCode: Code;
  /** Fail after this many tokens (engine error finish), -1: never. */
  failAfterTokens: number;
  serving: boolean;
  maxContext: number;
  requests: GenerateRequest[];
  /** performance.now() of each Generate the caller cancelled before it ended. */
  cancels: number[];
  generateCalls: number;
  /** WatchLoad and WatchKvEvents: this many messages, then the stream stays open until the caller cancels it (0: end at once). */
  watchMessages: number;
  stop(): void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `textTokens`: added tokens that are text (e.g. { "<tool_call>": 259 }, as Qwen's tokenizer has them): served in
 * GetModelInfo as special tokens listed in text_token_ids, and each occurrence in a reply is sent as that one id.
 */
export async function startConnectFake(o: { modelId?: string; serverId?: string; grpc?: boolean; chatTemplate?: string; textTokens?: Record<string, number> } = {}): Promise<ConnectFake> {
  const fake = {
    url: "",
    grpcUrl: "",
    modelId: o.modelId ?? "fake-moe",
    reply: "Hello, world!",
    replyFor: null as ((req: GenerateRequest) => string) | null,
    failOnCall: -1,
    tokenDelayMs: 0,
    pauseAt: -1,
    pauseMs: 0,
    failBeforeFirst: 0,
    failCode: Code.Unavailable,
    failAfterTokens: -1,
    serving: true,
    maxContext: 4096,
    requests: [] as GenerateRequest[],
    cancels: [] as number[],
    generateCalls: 0,
    watchMessages: 0,
    stop: () => {},
  } satisfies ConnectFake;
  const ranks = new TextEncoder().encode(byteRanks());

  /** The reply's ids: bytes, with each text token's string as its one id. */
  const encodeReply = (text: string): number[] => {
    const names = Object.keys(o.textTokens ?? {});
    if (names.length === 0) return encodeBytes(text);
    const parts = text.split(new RegExp(`(${names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})`));
    return parts.flatMap((p) => (o.textTokens![p] !== undefined ? [o.textTokens![p]!] : encodeBytes(p)));
  };

  const router = createConnectRouter();
  const impl: Parameters<typeof router.service<typeof ModelService>>[1] = {
    async getModelInfo() {
      return {
        modelId: fake.modelId,
        architecture: "qwen3_moe",
        tokenizer: { kind: "tiktoken", pattern: PATTERN, ranks, specialTokens: { ...SPECIAL_TOKENS, ...o.textTokens }, textTokenIds: Object.values(o.textTokens ?? {}) },
        chatTemplate: o.chatTemplate ?? CHATML,
        bosToken: "",
        eosToken: "<|im_end|>",
        eosTokenIds: [EOS_ID],
        blockSize: 4,
        maxContext: fake.maxContext,
        vocabSize: Math.max(259, ...Object.values(o.textTokens ?? {}).map((id) => id + 1)),
        serverId: o.serverId ?? "fake-0",
        backend: "cpu",
      };
    },
    async health() {
      return { status: fake.serving ? ServingStatus.SERVING : ServingStatus.NOT_SERVING, message: "" };
    },
    async *generate(req, ctx) {
      fake.generateCalls++;
      fake.requests.push(req);
      if (fake.generateCalls === fake.failOnCall) throw new ConnectError("injected failure", fake.failCode);
      if (fake.failBeforeFirst > 0) {
        fake.failBeforeFirst--;
        throw new ConnectError("injected failure", fake.failCode);
      }
      const ids = [...encodeReply(fake.replyFor ? fake.replyFor(req) : fake.reply), EOS_ID];
      const max = req.stop?.maxTokens || Number.POSITIVE_INFINITY;
      let finished = false;
      ctx.signal.addEventListener("abort", () => {
        if (!finished) fake.cancels.push(performance.now());
      });
      try {
        for (let i = 0; i < ids.length; i++) {
          if (fake.tokenDelayMs > 0) await sleep(fake.tokenDelayMs);
          if (i === fake.pauseAt) await sleep(fake.pauseMs);
          if (ctx.signal.aborted) return;
          if (fake.failAfterTokens >= 0 && i === fake.failAfterTokens) {
            yield { tokenIds: [], finishReason: FinishReason.ERROR };
            return;
          }
          const n = i + 1;
          const last = ids[i] === EOS_ID || n >= max;
          const finishReason = !last ? FinishReason.UNSPECIFIED : ids[i] === EOS_ID ? FinishReason.STOP : FinishReason.LENGTH;
          yield {
            tokenIds: [ids[i]!],
            finishReason,
            usage: last ? { promptTokens: req.promptTokenIds.length, completionTokens: n, cachedPromptTokens: 0 } : undefined,
          };
          if (last) return;
        }
      } finally {
        finished = !ctx.signal.aborted;
      }
    },
    async *watchLoad(_req, ctx) {
      if (fake.watchMessages === 0) return;
      for (let i = 0; i < fake.watchMessages; i++) yield { serverId: "fake", running: i, timestampUnixMs: BigInt(i) };
      await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
    },
    async *watchKvEvents(_req, ctx) {
      if (fake.watchMessages === 0) return;
      for (let i = 0; i < fake.watchMessages; i++) {
        yield { serverId: "fake", sequence: BigInt(i), events: [{ event: { case: "stored", value: { blockHashes: [BigInt(i) + 1n], parentHash: 0n } } }] };
      }
      await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
    },
  };
  router.service(ModelService, impl);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, createFetchHandler(h)]));
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch(req) {
      const h = handlers.get(new URL(req.url).pathname);
      return h ? h(req) : new Response("not found", { status: 404 });
    },
  });
  fake.url = `http://127.0.0.1:${server.port}`;
  let h2: http2.Http2Server | null = null;
  if (o.grpc) {
    h2 = http2.createServer(connectNodeAdapter({ routes: (r) => r.service(ModelService, impl), grpc: true, connect: false, grpcWeb: false }));
    await new Promise<void>((resolve) => h2!.listen(0, "127.0.0.1", resolve));
    fake.grpcUrl = `http://127.0.0.1:${(h2.address() as { port: number }).port}`;
  }
  fake.stop = () => {
    void server.stop(true);
    h2?.close();
  };
  return fake;
}

/** The prompt the fake was last given, as text (its byte tokens; special tokens dropped). */
export const lastPromptText = (f: ConnectFake) => new TextDecoder().decode(Uint8Array.from(f.requests.at(-1)!.promptTokenIds.filter((id) => id < 256)));
