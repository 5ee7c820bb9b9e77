/**
 * On a runner whose step runs off the engine's thread (backend "cuda"), the engine hands a step's
 * outputs to the streams only after launching the next step. These tests pin what that must not
 * change: every token arrives, in order, exactly once, with the right final message, under
 * cancellation and close; and they check that the hand-off really happens after the launch.
 */
import { describe, expect, test } from "bun:test";
import { createEngine, type Engine, type GenerateOutput, type GenerateStream } from "./engine";
import { createInstantRunner, instantNext } from "./testing/instant-runner";
import { withDeviceSampling } from "./testing/device-sampling-runner";
import { createToyRunner, toyContinuation } from "./testing/toy-runner";

const V = 1000;

function engineOver(runner: ReturnType<typeof createInstantRunner> | ReturnType<typeof withDeviceSampling>, maxNumSeqs = 8): Engine {
  return createEngine({
    runner,
    blockSize: 4,
    numKvBlocks: 256,
    maxNumSeqs,
    maxBatchTokens: 256,
    maxQueue: 16,
    serverId: "overlap-test",
    tokenBytes: (id) => new TextEncoder().encode(String.fromCharCode(97 + (id % 26))),
  });
}

async function collect(stream: GenerateStream, onMessage?: (o: GenerateOutput) => void): Promise<{ tokens: number[]; text: string; last: GenerateOutput }> {
  const tokens: number[] = [];
  let text = "";
  let last: GenerateOutput | null = null;
  for await (const o of stream) {
    onMessage?.(o);
    tokens.push(...o.tokenIds);
    text += o.textDelta;
    last = o;
  }
  if (!last) throw new Error("stream ended without a message");
  return { tokens, text, last };
}

function instantContinuation(prompt: number[], count: number): number[] {
  const ctx = [...prompt];
  for (let i = 0; i < count; i++) ctx.push(instantNext(ctx[ctx.length - 1]!, ctx.length - 1, V));
  return ctx.slice(prompt.length);
}

describe("engine: outputs handed over after the next step is launched", () => {
  test("a step's message reaches its stream while the next step runs", async () => {
    const runner = createInstantRunner({ vocabSize: V, deviceMs: 5 });
    const engine = engineOver(runner);
    const stepsAtMessage: number[] = [];
    const r = await collect(engine.generate({ promptTokenIds: [1, 2, 3, 4, 5], stop: { maxTokens: 10, ignoreEos: true } }), () => stepsAtMessage.push(runner.stats.steps));
    await engine.close();
    expect(r.tokens).toEqual(instantContinuation([1, 2, 3, 4, 5], 10));
    // Token i comes from step i + 1 and is handed over once step i + 2 is launched; the last
    // one when the loop runs out of work.
    expect(stepsAtMessage).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 10]);
  });

  test("concurrent streams of different lengths: same tokens as the toy model, in order, once", async () => {
    const toy = withDeviceSampling(createToyRunner({ vocabSize: 64, stepDelayMs: 1 }));
    const runner = { ...toy, backend: "cuda" as const };
    const engine = engineOver(runner, 4);
    const prompts = [[1, 2, 3], [4, 5, 6, 7, 8, 9], [10, 11], [12, 13, 14, 15, 16], [3, 1, 4, 1, 5, 9, 2, 6]];
    const results = await Promise.all(prompts.map((p, i) => collect(engine.generate({ promptTokenIds: p, stop: { maxTokens: 3 + 4 * i }, returnText: true }))));
    await engine.close();
    results.forEach((r, i) => {
      expect(r.tokens).toEqual(toyContinuation(prompts[i]!, 3 + 4 * i, 64));
      expect(r.text.length).toBe(3 + 4 * i);
      expect(r.last.finishReason).toBe("length");
      expect(r.last.usage?.completionTokens).toBe(3 + 4 * i);
    });
    expect(toy.calls.filter((c) => c === "forwardSampled").length).toBeGreaterThan(0);
  });

  test("cancel mid-stream: the tokens sent match the usage, blocks are freed, others finish", async () => {
    const runner = createInstantRunner({ vocabSize: V, deviceMs: 3 });
    const engine = engineOver(runner);
    const a = engine.generate({ promptTokenIds: [7, 8, 9], stop: { maxTokens: 200, ignoreEos: true } });
    let seen = 0;
    const ra = collect(a, () => {
      if (++seen === 4) a.cancel();
    });
    const rb = collect(engine.generate({ promptTokenIds: [1, 1, 1], stop: { maxTokens: 20, ignoreEos: true } }));
    const [x, y] = await Promise.all([ra, rb]);
    expect(x.last.finishReason).toBe("cancelled");
    expect(x.tokens.length).toBe(x.last.usage!.completionTokens);
    expect(x.tokens).toEqual(instantContinuation([7, 8, 9], x.tokens.length));
    expect(x.tokens.length).toBeLessThan(200);
    expect(y.tokens).toEqual(instantContinuation([1, 1, 1], 20));
    for (let i = 0; i < 100 && engine.load().kvBlocksUsed > 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(engine.load().kvBlocksUsed).toBe(0);
    await engine.close();
  });

  test("close while outputs are held: every stream ends cancelled with no token lost", async () => {
    const runner = createInstantRunner({ vocabSize: V, deviceMs: 3 });
    const engine = engineOver(runner);
    const streams = [0, 1, 2].map((i) => collect(engine.generate({ promptTokenIds: [i + 1, i + 2], stop: { maxTokens: 500, ignoreEos: true } })));
    for (let i = 0; i < 200 && runner.stats.steps < 6; i++) await new Promise((r) => setTimeout(r, 2));
    await engine.close();
    const rs = await Promise.all(streams);
    rs.forEach((r, i) => {
      expect(r.last.finishReason).toBe("cancelled");
      expect(r.tokens.length).toBe(r.last.usage!.completionTokens);
      expect(r.tokens).toEqual(instantContinuation([i + 1, i + 2], r.tokens.length));
    });
  });

  test("a failing step ends its streams with error after their earlier tokens", async () => {
    const runner = createInstantRunner({ vocabSize: V, deviceMs: 2 });
    const inner = runner.forwardSampled!;
    let n = 0;
    runner.forwardSampled = (step, sampling) => (++n === 5 ? Promise.reject(new Error("device lost")) : inner(step, sampling));
    const engine = engineOver(runner);
    const errors: unknown[] = [];
    const orig = console.error;
    console.error = (...a: unknown[]) => void errors.push(a);
    try {
      const r = await collect(engine.generate({ promptTokenIds: [5, 6, 7], stop: { maxTokens: 50, ignoreEos: true } }));
      expect(r.last.finishReason).toBe("error");
      expect(r.tokens).toEqual(instantContinuation([5, 6, 7], 4));
      expect(r.last.usage!.completionTokens).toBe(4);
    } finally {
      console.error = orig;
      await engine.close();
    }
    expect(errors.length).toBeGreaterThan(0);
  });
});
