import { describe, expect, test } from "bun:test";
import { GatewayError } from "../errors";
import { checkPromptLength, readBodyLimited } from "./limits";

const errOf = async (f: () => unknown) => {
  try {
    await f();
  } catch (e) {
    return e as GatewayError;
  }
  throw new Error("expected an error");
};

describe("body size limit", () => {
  test("under the limit reads the body", async () => {
    const body = await readBodyLimited(new Request("http://x/", { method: "POST", body: "hello" }), 5);
    expect(new TextDecoder().decode(body)).toBe("hello");
  });

  test("declared Content-Length over the limit is a 413 before reading", async () => {
    const req = new Request("http://x/", { method: "POST", body: "x".repeat(10), headers: { "content-length": "10" } });
    expect((await errOf(() => readBodyLimited(req, 5))).status).toBe(413);
  });

  test("a chunked body is cut off at the limit, without reading the rest", async () => {
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled++;
        if (pulled > 1000) return c.close();
        c.enqueue(new Uint8Array(1024));
      },
    });
    const err = await errOf(() => readBodyLimited(new Request("http://x/", { method: "POST", body: stream }), 4096));
    expect(err.status).toBe(413);
    expect(err.toBody().error.code).toBe("request_too_large");
    expect(pulled).toBeLessThan(10);
  });
});

describe("prompt length", () => {
  test("within limits passes", () => {
    checkPromptLength({ promptTokens: 100, maxPromptTokens: 100, contextLength: 200, maxOutputTokens: 100 });
  });
  test("over the operator cap or the context window is OpenAI's context_length_exceeded", async () => {
    const a = await errOf(() => checkPromptLength({ promptTokens: 101, maxPromptTokens: 100, contextLength: 0 }));
    expect(a.status).toBe(400);
    expect(a.toBody().error).toMatchObject({ code: "context_length_exceeded", param: "messages", type: "invalid_request_error" });
    const b = await errOf(() => checkPromptLength({ promptTokens: 150, maxPromptTokens: 0, contextLength: 200, maxOutputTokens: 51, param: "prompt" }));
    expect(b.message).toContain("maximum context length is 200 tokens");
    expect(b.param).toBe("prompt");
  });
});
