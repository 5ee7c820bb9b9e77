/**
 * One Generate call straight to a model server over Connect (HTTP/1.1, binary: what the gateway
 * itself speaks to dispatch servers), timed like the OpenAI client: a response message that
 * carries text is one timed chunk; the token count is the final usage. Running the same
 * workload this way and through the gateway gives the gateway's share of TTFT and ITL.
 *
 * @example
 *   const r = await generateDirect({ baseUrl: "http://127.0.0.1:50051", model: "m", prompt: [1, 2], outputLen: 16 });
 */
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import type { RequestRecord } from "./metrics";

export interface DirectCall {
  baseUrl: string;
  model: string;
  prompt: number[];
  outputLen: number;
  signal?: AbortSignal;
}

const clients = new Map<string, ReturnType<typeof createClient<typeof ModelService>>>();

function clientFor(baseUrl: string) {
  let c = clients.get(baseUrl);
  if (!c) {
    c = createClient(ModelService, createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }));
    clients.set(baseUrl, c);
  }
  return c;
}

let nextId = 0;

export async function generateDirect(c: DirectCall): Promise<RequestRecord> {
  const rec: RequestRecord = { sentAt: performance.now(), tokenTimes: [], promptTokens: c.prompt.length };
  try {
    const stream = clientFor(c.baseUrl).generate(
      {
        requestId: `bench-${process.pid}-${nextId++}`,
        model: c.model,
        promptTokenIds: c.prompt,
        sampling: { temperature: 0, topP: 1, topK: 0 },
        stop: { maxTokens: c.outputLen, minTokens: c.outputLen, ignoreEos: true },
        returnText: true,
      },
      { signal: c.signal },
    );
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
