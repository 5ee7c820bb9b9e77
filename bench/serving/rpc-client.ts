/**
 * One Generate call straight to a model server over Connect (HTTP/1.1, binary: what the gateway
 * itself speaks to dispatch servers), timed like the OpenAI client: a response message that
 * carries text is one timed chunk; the token count is the final usage. Running the same
 * workload this way and through the gateway gives the gateway's share of TTFT and ITL.
 *
 * The call goes over the gateway's own keep-alive socket client (gateway/src/rpc/socket-stream.ts),
 * so "direct" differs from the gateway path by the gateway's HTTP / OpenAI layer alone. Until
 * 2026-11-30 it went over @connectrpc/connect-node while the gateway moved to the socket client,
 * and the gateway measured faster than "direct" (-2.3% of TTFT at concurrency 1 on the H200).
 * DISPATCH_BENCH_DIRECT=connect-node takes the earlier transport.
 *
 * @example
 *   const r = await generateDirect({ baseUrl: "http://127.0.0.1:50051", model: "m", prompt: [1, 2], outputLen: 16 });
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { type GenerateRequest, GenerateRequestSchema, type GenerateResponse, GenerateResponseSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { createSocketStreams, type SocketStreams } from "../../gateway/src/rpc/socket-stream";
import type { RequestRecord } from "./metrics";

export interface DirectCall {
  baseUrl: string;
  model: string;
  prompt: number[];
  outputLen: number;
  signal?: AbortSignal;
}

const useSockets = process.env.DISPATCH_BENCH_DIRECT !== "connect-node";
const clients = new Map<string, ReturnType<typeof createClient<typeof ModelService>>>();
const sockets = new Map<string, SocketStreams>();

/** Generate's response messages for `req`, over the socket client or the connect-node transport. */
async function* generateStream(baseUrl: string, req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerateResponse> {
  const base = baseUrl.replace(/\/+$/, "");
  if (useSockets && base.startsWith("http://")) {
    let s = sockets.get(base);
    if (!s) sockets.set(base, (s = createSocketStreams(base)));
    const request = toBinary(GenerateRequestSchema, req);
    const method = "dispatch.v1.ModelService/Generate";
    for await (const bytes of s.call({ method, request, signal: signal ?? new AbortController().signal })) {
      yield fromBinary(GenerateResponseSchema, bytes);
    }
    return;
  }
  let c = clients.get(base);
  if (!c) {
    c = createClient(ModelService, createConnectTransport({ baseUrl: base, httpVersion: "1.1", useBinaryFormat: true }));
    clients.set(base, c);
  }
  yield* c.generate(req, { signal });
}

let nextId = 0;

export async function generateDirect(c: DirectCall): Promise<RequestRecord> {
  const rec: RequestRecord = { sentAt: performance.now(), tokenTimes: [], promptTokens: c.prompt.length };
  try {
    const req = create(GenerateRequestSchema, {
      requestId: `bench-${process.pid}-${nextId++}`,
      model: c.model,
      promptTokenIds: c.prompt,
      sampling: { temperature: 0, topP: 1, topK: 0 },
      stop: { maxTokens: c.outputLen, minTokens: c.outputLen, ignoreEos: true },
      returnText: true,
    });
    const stream = generateStream(c.baseUrl, req, c.signal);
    let tokens = 0;
    for await (const m of stream) {
      const now = performance.now();
      tokens += m.tokenIds.length;
      // timed like the OpenAI client: a message that carries text (returnText is on). A token
      // that ends inside a UTF-8 character brings no text yet, and the gateway cannot stream a
      // chunk for it either, so timing token arrival would credit the direct path with a step
      // the gateway's client cannot see.
      if (m.textDelta.length > 0) rec.tokenTimes.push(now);
      if (m.usage) rec.outputTokens = m.usage.completionTokens;
    }
    rec.outputTokens ??= tokens;
  } catch (e) {
    rec.error = e instanceof Error ? e.message : String(e);
  }
  return rec;
}
