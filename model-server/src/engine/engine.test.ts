import { describe, expect, test } from "bun:test";
import { hasSelectableLogit } from "./accept";
import { createEngine, type EngineOptions, type GenerateOutput, type GenerateStream } from "./engine";
import { EngineError } from "./errors";
import { withDeviceSampling, type DeviceSamplingRunner } from "./testing/device-sampling-runner";
import { createToyRunner, toyContinuation, type ToyRunnerOptions } from "./testing/toy-runner";

const V = 64;
const range = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => (i + offset) % (V - 1));

function setup(o: Partial<EngineOptions> = {}, r: ToyRunnerOptions = {}) {
  const runner = createToyRunner({ vocabSize: V, ...r });
  const engine = createEngine({
    runner,
    blockSize: 4,
    numKvBlocks: 64,
    maxNumSeqs: 8,
    maxBatchTokens: 32,
    maxQueue: 16,
    serverId: "test",
    tokenBytes: (id) => new TextEncoder().encode(String.fromCharCode(97 + (id % 26))),
    ...o,
  });
  return { runner, engine };
}

async function collect(s: GenerateStream): Promise<{ tokens: number[]; outs: GenerateOutput[] }> {
  const outs: GenerateOutput[] = [];
  for await (const o of s) outs.push(o);
  return { tokens: outs.flatMap((o) => o.tokenIds), outs };
}

function expectCode(f: () => unknown, code: string) {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(EngineError);
    expect((e as EngineError).code).toBe(code as EngineError["code"]);
    return;
  }
  throw new Error(`expected EngineError ${code}`);
}

describe("engine", () => {
  test("streams the greedy continuation with usage and a final finish reason", async () => {
    const { engine } = setup();
    const prompt = range(10, 3);
    const { tokens, outs } = await collect(engine.generate({ promptTokenIds: prompt, stop: { maxTokens: 12 }, returnText: true }));
    expect(tokens).toEqual(toyContinuation(prompt, 12, V));
    const last = outs[outs.length - 1]!;
    expect(last.finishReason).toBe("length");
    expect(last.usage).toEqual({ promptTokens: 10, completionTokens: 12, cachedPromptTokens: 0 });
    expect(outs.slice(0, -1).every((o) => o.finishReason === null)).toBe(true);
    expect(outs[0]!.queueTimeMs).toBeGreaterThanOrEqual(0);
    expect(outs.map((o) => o.textDelta).join("")).toBe(tokens.map((t) => String.fromCharCode(97 + (t % 26))).join(""));
    expect(engine.load().kvBlocksUsed).toBe(0);
    await engine.close();
  });

  test("concurrent streams share steps and a cached prefix, and stay exact", async () => {
    const { engine, runner } = setup();
    const system = range(16, 5);
    const first = await collect(engine.generate({ promptTokenIds: [...system, 1, 2], stop: { maxTokens: 4 } }));
    expect(first.tokens).toEqual(toyContinuation([...system, 1, 2], 4, V));
    const prompts = Array.from({ length: 6 }, (_, i) => [...system, 10 + i, 20 + i, 30 + i]);
    const results = await Promise.all(prompts.map((p) => collect(engine.generate({ promptTokenIds: p, stop: { maxTokens: 10 } }))));
    results.forEach((r, i) => expect(r.tokens).toEqual(toyContinuation(prompts[i]!, 10, V)));
    for (const r of results) expect(r.outs.at(-1)!.usage!.cachedPromptTokens).toBe(16);
    expect(runner.stats.maxBatch).toBeGreaterThanOrEqual(6);
    await engine.close();
  });

  test("preempts under KV exhaustion and still produces exact outputs, never crashing", async () => {
    // 10 blocks of 4 tokens; four sequences that want 7 blocks each at the end.
    let preempted = 0;
    const { engine, runner } = setup({ numKvBlocks: 10, maxBatchTokens: 16, onStep: (s) => (preempted += s.preempted) });
    const prompts = Array.from({ length: 4 }, (_, i) => range(6, 7 * i));
    const results = await Promise.all(prompts.map((p) => collect(engine.generate({ promptTokenIds: p, stop: { maxTokens: 20 } }))));
    results.forEach((r, i) => expect(r.tokens).toEqual(toyContinuation(prompts[i]!, 20, V)));
    expect(engine.load().kvBlocksUsed).toBe(0);
    // Preemption happened: more tokens were computed than the 4 x (6 + 19) a single pass needs.
    expect(runner.stats.tokens).toBeGreaterThan(100);
    expect(preempted).toBeGreaterThan(0); // and the steps said so (dispatch_ms_preemptions_total)
    await engine.close();
  });

  test("cancellation frees the sequence's blocks", async () => {
    const { engine } = setup({}, { stepDelayMs: 2 });
    const s = engine.generate({ promptTokenIds: range(20), stop: { maxTokens: 500 } });
    const outs: GenerateOutput[] = [];
    for await (const o of s) {
      outs.push(o);
      if (outs.length === 2) s.cancel();
    }
    expect(outs.at(-1)!.finishReason).toBe("cancelled");
    expect(engine.load().kvBlocksUsed).toBe(0);
    expect(engine.load().running).toBe(0);
    // A waiting sequence cancelled before it ever ran frees nothing and ends at once.
    const { engine: e2 } = setup({ maxNumSeqs: 1 }, { stepDelayMs: 2 });
    const a = e2.generate({ promptTokenIds: range(8), stop: { maxTokens: 50 } });
    const b = e2.generate({ promptTokenIds: range(8, 9), stop: { maxTokens: 50 } });
    b.cancel();
    expect((await collect(b)).outs.at(-1)!.finishReason).toBe("cancelled");
    a.cancel();
    await collect(a);
    expect(e2.load().kvBlocksUsed).toBe(0);
    await engine.close();
    await e2.close();
  });

  test("admission control: full queue is resource_exhausted, bad arguments invalid_argument", async () => {
    const { engine } = setup({ maxNumSeqs: 1, maxQueue: 2, numKvBlocks: 16 }, { stepDelayMs: 1, maxContext: 40 });
    const running = engine.generate({ promptTokenIds: range(4), stop: { maxTokens: 30 } });
    await running[Symbol.asyncIterator]().next(); // admitted and running
    const w1 = engine.generate({ promptTokenIds: range(4), stop: { maxTokens: 3 } });
    const w2 = engine.generate({ promptTokenIds: range(4), stop: { maxTokens: 3 } });
    expectCode(() => engine.generate({ promptTokenIds: range(4) }), "resource_exhausted");
    expectCode(() => engine.generate({ promptTokenIds: [] }), "invalid_argument");
    expectCode(() => engine.generate({ promptTokenIds: range(40) }), "invalid_argument");
    expectCode(() => engine.generate({ promptTokenIds: [V] }), "invalid_argument");
    expectCode(() => engine.generate({ promptTokenIds: [1], sampling: { temperature: -1 } }), "invalid_argument");
    expectCode(() => engine.generate({ promptTokenIds: [1], sampling: { topP: 1.5 } }), "invalid_argument");
    expectCode(() => engine.generate({ promptTokenIds: [1], sampling: { presencePenalty: 3 } }), "invalid_argument");
    expectCode(() => engine.generate({ promptTokenIds: [1], stop: { maxTokens: 2, minTokens: 3 } }), "invalid_argument");
    running.cancel();
    await Promise.all([collect(w1), collect(w2)]);
    // The context limit (40) caps generation: finish reason length at 40 tokens total.
    const long = await collect(engine.generate({ promptTokenIds: range(30) }));
    expect(long.tokens.length).toBe(10);
    expect(long.outs.at(-1)!.finishReason).toBe("length");
    await engine.close();
  });

  test("same seed, same output, whatever else is in the batch", async () => {
    const params = { promptTokenIds: range(7, 2), sampling: { temperature: 1, topP: 0.9, seed: 1234n }, stop: { maxTokens: 24 } };
    const alone = setup();
    const a = await collect(alone.engine.generate(params));
    const busy = setup();
    const noise = Array.from({ length: 5 }, (_, i) => busy.engine.generate({ promptTokenIds: range(5 + i, i), sampling: { temperature: 1 }, stop: { maxTokens: 30 } }));
    const b = collect(busy.engine.generate(params));
    await Promise.all(noise.map(collect));
    expect((await b).tokens).toEqual(a.tokens);
    expect(a.tokens).not.toEqual(toyContinuation(params.promptTokenIds, 24, V)); // it did sample
    await alone.engine.close();
    await busy.engine.close();
  });

  test("stop ids, EOS, min_tokens and ignore_eos", async () => {
    const { engine } = setup();
    const prompt = range(6, 1);
    const expected = toyContinuation(prompt, 20, V);
    const stopAt = expected[5]!;
    const firstIdx = expected.indexOf(stopAt);
    const s = await collect(engine.generate({ promptTokenIds: prompt, stop: { maxTokens: 20, stopTokenIds: [stopAt] }, returnText: true }));
    expect(s.tokens).toEqual(expected.slice(0, firstIdx + 1));
    expect(s.outs.at(-1)!.finishReason).toBe("stop");
    // The stop token carries no text.
    expect(s.outs.map((o) => o.textDelta).join("").length).toBe(firstIdx);
    // min_tokens: the stop id is banned until then, so the output diverges from greedy after it.
    const m = await collect(engine.generate({ promptTokenIds: prompt, stop: { maxTokens: 20, stopTokenIds: [stopAt], minTokens: 10 } }));
    expect(m.tokens.length).toBeGreaterThanOrEqual(10);
    expect(m.tokens.slice(0, 10)).not.toContain(stopAt);
    await engine.close();
  });

  test("deadline ends a sequence with finish reason deadline", async () => {
    const { engine } = setup({}, { stepDelayMs: 5 });
    const r = await collect(engine.generate({ promptTokenIds: range(5), stop: { maxTokens: 1000 }, deadlineMs: Date.now() + 60 }));
    expect(r.outs.at(-1)!.finishReason).toBe("deadline");
    expect(r.tokens.length).toBeLessThan(1000);
    expect(engine.load().kvBlocksUsed).toBe(0);
    await engine.close();
  });

  test("speculative verify steps (prompt lookup) give exactly the greedy output in fewer steps", async () => {
    // A repetitive prompt makes n-gram proposals right most of the time.
    const prompt = [...range(12, 2), ...range(12, 2), ...range(12, 2)];
    const plain = setup({}, { period: 12 });
    const spec = setup({ specTokens: 4 }, { period: 12 });
    const p = await collect(plain.engine.generate({ promptTokenIds: prompt, stop: { maxTokens: 40 } }));
    const s = await collect(spec.engine.generate({ promptTokenIds: prompt, stop: { maxTokens: 40 } }));
    expect(s.tokens).toEqual(p.tokens);
    expect(s.tokens).toEqual(toyContinuation(prompt, 40, V, 12));
    // 2 prefill chunks (36 tokens, budget 32) + 39 decodes plain; verify steps of 4 proposals accepting all: 2 + 8.
    expect(plain.runner.stats.steps).toBe(41);
    expect(spec.runner.stats.steps).toBeLessThanOrEqual(11);
    expect(s.outs.some((o) => o.tokenIds.length === 5)).toBe(true);
    expect(spec.engine.load().kvBlocksUsed).toBe(0);
    await plain.engine.close();
    await spec.engine.close();
  });

  test("exports a sequence's KV and resumes it on another engine (prefill/decode split)", async () => {
    const prefill = setup({}, { stepDelayMs: 1 });
    const decode = setup();
    const prompt = range(13, 4);
    const src = prefill.engine.generate({ requestId: "r1", promptTokenIds: prompt, stop: { maxTokens: 100 } });
    const it = src[Symbol.asyncIterator]();
    await it.next(); // prefill done, first token out
    const { tokenIds, kv } = prefill.engine.exportKv("r1");
    expect(tokenIds).toEqual(prompt);
    src.cancel();
    while (!(await it.next()).done);
    const r = await collect(decode.engine.generate({ promptTokenIds: prompt, importedKv: kv, stop: { maxTokens: 8 } }));
    expect(r.tokens).toEqual(toyContinuation(prompt, 8, V));
    expect(decode.runner.stats.tokens).toBeLessThan(prompt.length); // the prompt was not recomputed
    await prefill.engine.close();
    await decode.engine.close();
  });

  test("publishes KV events and load", async () => {
    const { engine } = setup();
    const sub = engine.kvFeed.subscribe({ snapshot: true });
    let changes = 0;
    const off = engine.onLoadChange(() => changes++);
    await collect(engine.generate({ promptTokenIds: range(9), stop: { maxTokens: 3 } }));
    off();
    const it = sub[Symbol.asyncIterator]();
    const snap = (await it.next()).value!;
    expect(snap.snapshot).toBe(true);
    const live = (await it.next()).value!;
    expect(live.events[0]).toMatchObject({ kind: "stored", parent: 0n });
    expect(changes).toBeGreaterThan(0);
    const load = engine.load();
    expect(load.kvBlocksCached).toBeGreaterThanOrEqual(2);
    expect(load.kvBlocksTotal).toBe(64);
    expect(load.decodeStepsPerS).toBeGreaterThan(0);
    expect(load.prefillTokensPerS).toBeGreaterThan(0);
    sub.close();
    await engine.close();
  });

  test("a failing forward step ends its sequences with finish reason error; the engine keeps serving", async () => {
    const { engine, runner } = setup();
    const forward = runner.forward.bind(runner);
    let fail = true;
    runner.forward = async (step) => {
      if (fail) {
        fail = false;
        throw new Error("device lost");
      }
      return forward(step);
    };
    const bad = await collect(engine.generate({ promptTokenIds: range(5), stop: { maxTokens: 4 } }));
    expect(bad.outs.at(-1)!.finishReason).toBe("error");
    expect(engine.load().kvBlocksUsed).toBe(0);
    const good = await collect(engine.generate({ promptTokenIds: range(5), stop: { maxTokens: 4 } }));
    expect(good.tokens).toEqual(toyContinuation(range(5), 4, V));
    await engine.close();
  });

  test("a step that never returns (a stuck device): past stepTimeoutMs every live sequence ends with error, new work is refused, onStalled is told", async () => {
    const reasons: string[] = [];
    // steps 0-2 run (two prefills in one step, then decode), step 3 never returns
    const { engine } = setup({ stepTimeoutMs: 150, onStalled: (r) => reasons.push(r) }, { stuckFromStep: 3 });
    const started = performance.now();
    const [a, b] = await Promise.all([
      collect(engine.generate({ promptTokenIds: range(5), stop: { maxTokens: 50 } })),
      collect(engine.generate({ promptTokenIds: range(6, 9), stop: { maxTokens: 50 } })),
    ]);
    const waited = performance.now() - started;
    for (const [s, prompt] of [[a, range(5)], [b, range(6, 9)]] as const) {
      expect(s.outs.at(-1)!.finishReason).toBe("error");
      expect(s.tokens.length).toBeGreaterThan(0); // what the steps before the stuck one produced was streamed
      expect(s.tokens).toEqual(toyContinuation(prompt, s.tokens.length, V));
    }
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(5000);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toContain("has not returned in 0.15 s");
    expect(engine.load().running).toBe(0);
    expectCode(() => engine.generate({ promptTokenIds: range(5) }), "unavailable");
    await engine.close();
  });

  test("a slow step that returns within stepTimeoutMs is not taken for a stuck one", async () => {
    const reasons: string[] = [];
    const { engine } = setup({ stepTimeoutMs: 400, onStalled: (r) => reasons.push(r) }, { stepDelayMs: 40 });
    const { tokens, outs } = await collect(engine.generate({ promptTokenIds: range(5), stop: { maxTokens: 6 } }));
    expect(outs.at(-1)!.finishReason).toBe("length");
    expect(tokens).toEqual(toyContinuation(range(5), 6, V));
    expect(reasons).toEqual([]);
    await engine.close();
  });

  for (const device of [false, true]) {
    test(`logits with no finite value end that sequence with an error; the rest of the step goes on (${device ? "device" : "host"} sampling)`, async () => {
      const toy = createToyRunner({ vocabSize: V });
      // the sequence whose prefill starts with token 60 gets NaN logits from its third step on
      const poisoned = new Set<number>();
      let calls = 0;
      const forward = toy.forward.bind(toy);
      toy.forward = async (step) => {
        const out = await forward(step);
        step.seqs.forEach((q, i) => {
          if (q.startPos === 0 && q.tokens[0] === 60) poisoned.add(q.blockTable[0]!);
          if (poisoned.has(q.blockTable[0]!) && q.startPos > 6) out[i]!.fill(Number.NaN);
        });
        calls++;
        return out;
      };
      const runner = device ? withDeviceSampling(toy) : toy;
      const { engine } = setup({ runner });
      const [bad, good] = await Promise.all([
        collect(engine.generate({ promptTokenIds: [60, 1, 2, 3, 4], stop: { maxTokens: 8 } })),
        collect(engine.generate({ promptTokenIds: range(5), stop: { maxTokens: 8 } })),
      ]);
      expect(bad.outs.at(-1)!.finishReason).toBe("error");
      expect(bad.tokens.length).toBeLessThan(8);
      expect(bad.tokens).toEqual(toyContinuation([60, 1, 2, 3, 4], bad.tokens.length, V));
      expect(good.outs.at(-1)!.finishReason).toBe("length");
      expect(good.tokens).toEqual(toyContinuation(range(5), 8, V));
      expect(calls).toBeGreaterThan(2);
      expect(engine.load().kvBlocksUsed).toBe(0);
      if (device) expect((runner as DeviceSamplingRunner).calls).toContain("forwardSampled");
      await engine.close();
    });
  }

  test("hasSelectableLogit: NaN and -Infinity are not selectable, anything else is", () => {
    expect(hasSelectableLogit(Float32Array.of(Number.NaN, Number.NEGATIVE_INFINITY))).toBe(false);
    expect(hasSelectableLogit(Float32Array.of(Number.NaN, -3.4e38))).toBe(true);
    expect(hasSelectableLogit(new Float32Array(0))).toBe(false);
  });

  test("drain refuses new work, lets running sequences finish, then cancels what is left", async () => {
    const { engine } = setup({}, { stepDelayMs: 1 });
    const short = collect(engine.generate({ promptTokenIds: range(5), stop: { maxTokens: 5 } }));
    const drained = engine.drain(2000);
    expectCode(() => engine.generate({ promptTokenIds: range(5) }), "unavailable");
    expect((await short).outs.at(-1)!.finishReason).toBe("length");
    expect(await drained).toBe(0);

    const { engine: e2 } = setup({}, { stepDelayMs: 1 });
    const long = collect(e2.generate({ promptTokenIds: range(5), stop: { maxTokens: 100000 } }));
    expect(await e2.drain(30)).toBe(1);
    expect((await long).outs.at(-1)!.finishReason).toBe("cancelled");
  });
});

test("no observer hook runs before generate() returns, on a fresh engine's first request too", async () => {
  const { engine } = setup();
  const calls: string[] = [];
  const observer = { admitted: () => calls.push("admitted"), tokens: () => calls.push("tokens"), finished: () => calls.push("finished") };
  const stream = engine.generate({ promptTokenIds: range(6), stop: { maxTokens: 2 }, observer });
  expect(calls).toEqual([]);
  await collect(stream);
  expect(calls[0]).toBe("admitted");
  expect(calls.at(-1)).toBe("finished");
});
