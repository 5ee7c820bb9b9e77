import { describe, expect, test } from "bun:test";
import { GatewayError } from "../errors";
import type { Call } from "../workers/backend";
import { type Outcome, sseResponse } from "./sse-response";

/** A call that hands out `ready` (once) and then `frames` through next(). */
function fakeCall(ready: (() => string | undefined) | undefined, frames: (string | Error)[]): Call {
  let i = 0;
  return {
    backendId: "b",
    stats: { promptTokens: 1, completionTokens: 0, finishReason: null },
    close() {},
    ready,
    async next() {
      if (i >= frames.length) return null;
      const f = frames[i++]!;
      if (f instanceof Error) throw f;
      return f;
    },
  };
}

async function run(call: Call): Promise<{ body: string; outcomes: Outcome[] }> {
  const outcomes: Outcome[] = [];
  const res = sseResponse(call, "id-1", {
    clientGone: () => false,
    failure: (err) => (err instanceof GatewayError ? err : new GatewayError(500, String(err), "server_error", "internal_error")),
    finish: (o) => outcomes.push(o),
  });
  return { body: await res.text(), outcomes };
}

describe("sseResponse with Call.ready()", () => {
  test("the ready frame goes first, then next()'s, then a clean finish", async () => {
    const r = await run(fakeCall(() => "data: 1\n\n", ["data: 2\n\n", "data: [DONE]\n\n"]));
    expect(r.body).toBe("data: 1\n\ndata: 2\n\ndata: [DONE]\n\n");
    expect(r.outcomes).toEqual([{ status: 200, cancelled: false }]);
  });

  test("nothing ready (\"\" or undefined): next() alone, as without ready()", async () => {
    for (const ready of [() => "", () => undefined, undefined]) {
      const r = await run(fakeCall(ready, ["data: a\n\n"]));
      expect(r.body).toBe("data: a\n\n");
      expect(r.outcomes).toEqual([{ status: 200, cancelled: false }]);
    }
  });

  test("ready() throwing ends the stream with one SSE error event, as next() throwing does", async () => {
    const err = new GatewayError(502, "Model server b failed while generating.", "server_error", "upstream_error");
    const r = await run(
      fakeCall(() => {
        throw err;
      }, ["data: never\n\n"]),
    );
    expect(r.body).toBe(`data: ${JSON.stringify(err.toBody())}\n\n`);
    expect(r.outcomes.length).toBe(1);
    expect(r.outcomes[0]!.status).toBe(502);
    expect(r.outcomes[0]!.streaming).toBe(true);
  });
});
