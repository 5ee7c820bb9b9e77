/**
 * Client-side helpers for the socket client's wire tests: a Generate call on a
 * SocketStreams, its tokens, the ConnectError it fails with, and servers and
 * clients closed after each test.
 */
import { afterEach, expect } from "bun:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { GenerateRequestSchema, GenerateResponseSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { createSocketStreams, type SocketStreams } from "../src/rpc/socket-stream";
import { endStream, envelope, type RawServer, startRawServer } from "./raw-http1-server";

export const GENERATE = "dispatch.v1.ModelService/Generate";
export const request = toBinary(GenerateRequestSchema, create(GenerateRequestSchema, { requestId: "w", model: "m", promptTokenIds: [1, 2, 3] }));
/** One GenerateResponse envelope carrying `token`. */
export const msg = (token: number, finish = 0) => envelope(0, toBinary(GenerateResponseSchema, create(GenerateResponseSchema, { tokenIds: [token], finishReason: finish })));
/** Three messages (tokens 72, 105, 33, the last with finish STOP) and the end of the stream. */
export const REPLY = [msg(72), msg(105), msg(33, 1), endStream()];
export const REPLY_TOKENS = [72, 105, 33];

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

/** A raw server stopped after the test. */
export function server(...a: Parameters<typeof startRawServer>): RawServer {
  const s = startRawServer(...a);
  cleanup.push(() => s.stop());
  return s;
}

/** A socket client closed after the test. */
export function client(url: string, o?: { maxIdle?: number }): SocketStreams {
  const s = createSocketStreams(url, o);
  cleanup.push(() => s.close());
  return s;
}

export const call = (s: SocketStreams, signal: AbortSignal = AbortSignal.timeout(5000), req: Uint8Array = request) => s.call({ method: GENERATE, request: req, signal });

export async function tokens(it: AsyncIterable<Uint8Array>): Promise<number[]> {
  const out: number[] = [];
  for await (const b of it) out.push(...fromBinary(GenerateResponseSchema, b).tokenIds);
  return out;
}

/** The ConnectError a promise rejects with (fails the test if it resolves or throws something else). */
export async function errorOf(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return err as ConnectError;
  }
  throw new Error("expected a rejection");
}

/** Waits (at most `ms`) until `cond` holds; returns whether it does. */
export async function until(cond: () => boolean, ms = 2000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await Bun.sleep(2);
  return cond();
}
