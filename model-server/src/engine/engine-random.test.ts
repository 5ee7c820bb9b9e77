/**
 * Randomized workloads over the strict toy runner: shared prefixes, a small KV
 * cache (preemption), chunked prefill, verify steps, cancellations. Every
 * completed stream must equal the reference continuation, and no block may
 * leak. Seeded, bounded, fast.
 */
import { expect, test } from "bun:test";
import { createEngine, type GenerateOutput } from "./engine";
import { createRng } from "./rng";
import { createToyRunner, toyContinuation } from "./testing/toy-runner";

const V = 48;

const SEEDS = Number(process.env.ENGINE_RANDOM_SEEDS ?? 8);
for (let k = 1; k <= SEEDS; k++) {
  const seed = BigInt(k);
  test(`random workload, seed ${seed}`, async () => {
    const rng = createRng(seed);
    const int = (lo: number, hi: number) => lo + Math.floor(rng.next() * (hi - lo + 1));
    const blockSize = int(2, 6);
    const runner = createToyRunner({ vocabSize: V });
    const engine = createEngine({
      runner,
      blockSize,
      numKvBlocks: int(12, 40),
      maxNumSeqs: int(1, 6),
      maxBatchTokens: int(8, 40),
      maxQueue: 64,
      serverId: "r",
      specTokens: int(0, 1) * int(1, 4),
    });
    const prefixes = Array.from({ length: 3 }, () => Array.from({ length: int(0, 12) }, () => int(0, V - 2)));
    const jobs = Array.from({ length: int(6, 14) }, () => {
      const prompt = [...prefixes[int(0, 2)]!, ...Array.from({ length: int(1, 8) }, () => int(0, V - 2))];
      const maxTokens = int(1, 20);
      const cancelAfter = rng.next() < 0.25 ? int(0, 3) : -1;
      const sampling = rng.next() < 0.4 ? { temperature: 0.5 + rng.next(), topP: rng.next() < 0.5 ? 0.9 : 1, topK: int(0, 8), seed: BigInt(int(0, 1e6)) } : undefined;
      return { prompt, maxTokens, cancelAfter, sampling };
    });
    const results = await Promise.all(
      jobs.map(async (j, i) => {
        await Bun.sleep(int(0, 3) * i); // staggered arrivals
        const s = engine.generate({ promptTokenIds: j.prompt, sampling: j.sampling, stop: { maxTokens: j.maxTokens, ignoreEos: true } });
        const outs: GenerateOutput[] = [];
        for await (const o of s) {
          outs.push(o);
          if (j.cancelAfter >= 0 && outs.length > j.cancelAfter) s.cancel();
        }
        return outs;
      }),
    );
    // Sampled requests are checked against the same request alone on a roomy engine.
    const alone = createEngine({ runner: createToyRunner({ vocabSize: V }), blockSize, numKvBlocks: 256, maxNumSeqs: 1, maxBatchTokens: 64, maxQueue: 1, serverId: "alone" });
    for (let i = 0; i < jobs.length; i++) {
      const j = jobs[i]!;
      const outs = results[i]!;
      const tokens = outs.flatMap((o) => o.tokenIds);
      const last = outs.at(-1)!;
      const room = Math.min(j.maxTokens, engine.maxLen - j.prompt.length);
      let expected = toyContinuation(j.prompt, room, V);
      if (j.sampling) {
        expected = [];
        for await (const o of alone.generate({ promptTokenIds: j.prompt, sampling: j.sampling, stop: { maxTokens: room, ignoreEos: true } })) expected.push(...o.tokenIds);
      }
      if (last.finishReason === "cancelled") expect(tokens).toEqual(expected.slice(0, tokens.length));
      else {
        expect(last.finishReason).toBe("length");
        expect(tokens).toEqual(expected);
      }
      expect(last.usage!.completionTokens).toBe(tokens.length);
    }
    await alone.close();
    const load = engine.load();
    expect(load.kvBlocksUsed).toBe(0);
    expect(load.running + load.waiting).toBe(0);
    await engine.close();
  });
}
