/**
 * The engine over a data-parallel runner that reports `kvPools`: each sequence
 * runs on rank `blockTable[0] mod N`, and a rank stores only the ids b with
 * b mod N == rank, at local index floor(b / N) (as the CUDA EP runner does).
 * Here every rank is a strict toy runner with its own small KV storage, so a
 * table that leaves its pool throws (or reads another sequence's KV) and a
 * wrong mapping changes outputs. Outputs must equal the one-pool engine's.
 */
import { describe, expect, test } from "bun:test";
import type { KvExport, ModelRunner, StepInput, StepOutput } from "../model/runner";
import { createEngine, type EngineOptions, type GenerateOutput, type GenerateParams } from "./engine";
import { createRng } from "./rng";
import { createToyRunner, toyContinuation, type ToyRunner } from "./testing/toy-runner";

const V = 48;

interface PooledRunner extends ModelRunner {
  readonly kvPools: number;
  /** Per rank: sequences (chunks) run there; and the block tables seen, for assertions. */
  readonly chunksPerRank: number[];
  readonly tablesSeen: Int32Array[];
}

/** N toy ranks behind one runner; sequence KV on rank table[0] mod N, local block floor(b / N). */
function createPooledRunner(n: number): PooledRunner {
  const ranks: ToyRunner[] = Array.from({ length: n }, () => createToyRunner({ vocabSize: V }));
  const chunksPerRank = new Array<number>(n).fill(0);
  const tablesSeen: Int32Array[] = [];
  const local = (table: Int32Array, rank: number) =>
    table.map((b) => {
      if (b % n !== rank) throw new Error(`pooled runner: block ${b} is not in pool ${rank} (table ${[...table]})`);
      return Math.floor(b / n);
    });
  return {
    spec: ranks[0]!.spec,
    backend: "cpu",
    kvPools: n,
    chunksPerRank,
    tablesSeen,
    allocateKv(numBlocks, blockSize) {
      ranks.forEach((r, i) => r.allocateKv(Math.floor((numBlocks - 1 - i) / n) + 1, blockSize));
    },
    kvBytesPerBlock: (blockSize) => ranks[0]!.kvBytesPerBlock(blockSize),
    async forward(step: StepInput): Promise<StepOutput> {
      const out: StepOutput = new Array(step.seqs.length);
      const byRank = ranks.map(() => [] as number[]);
      step.seqs.forEach((s, i) => {
        tablesSeen.push(s.blockTable);
        byRank[s.blockTable[0]! % n]!.push(i);
      });
      for (let r = 0; r < n; r++) {
        const idx = byRank[r]!;
        if (idx.length === 0) continue;
        chunksPerRank[r]! += idx.length;
        const part = await ranks[r]!.forward({ seqs: idx.map((i) => ({ ...step.seqs[i]!, blockTable: local(step.seqs[i]!.blockTable, r) })) });
        idx.forEach((i, j) => (out[i] = part[j]!));
      }
      return out;
    },
    exportKv(blockIds): KvExport {
      const parts = [...blockIds].map((b) => ranks[b % n]!.exportKv(Int32Array.of(Math.floor(b / n))));
      const data = new Uint8Array(parts.reduce((k, p) => k + p.data.byteLength, 0));
      parts.reduce((o, p) => (data.set(p.data, o), o + p.data.byteLength), 0);
      return { ...parts[0]!, numBlocks: blockIds.length, data };
    },
    importKv(blockIds, kv) {
      const per = kv.data.byteLength / kv.numBlocks;
      blockIds.forEach((b, i) => ranks[b % n]!.importKv(Int32Array.of(Math.floor(b / n)), { ...kv, numBlocks: 1, data: kv.data.slice(i * per, (i + 1) * per) }));
    },
    close() {
      ranks.forEach((r) => r.close());
    },
  };
}

/** Every job's tokens, and the prompt tokens taken from the prefix cache in all. */
async function run(engineOpts: Omit<EngineOptions, "runner" | "serverId">, runner: ModelRunner, jobs: GenerateParams[]): Promise<{ tokens: number[][]; cached: number }> {
  const engine = createEngine({ ...engineOpts, runner, serverId: "pools" });
  let cached = 0;
  const tokens = await Promise.all(
    jobs.map(async (j, i) => {
      await Bun.sleep(i % 3); // staggered arrivals
      const outs: GenerateOutput[] = [];
      for await (const o of engine.generate(j)) outs.push(o);
      expect(outs.at(-1)!.finishReason).toBe("length");
      cached += outs.at(-1)!.usage!.cachedPromptTokens;
      return outs.flatMap((o) => o.tokenIds);
    }),
  );
  const load = engine.load();
  expect(load.kvBlocksUsed).toBe(0);
  expect(load.running + load.waiting).toBe(0);
  await engine.close();
  return { tokens, cached };
}

describe("engine with KV pools (data-parallel runner)", () => {
  test("reads kvPools from the runner and caps sequences at the smallest pool", async () => {
    const o = { blockSize: 4, numKvBlocks: 20, maxNumSeqs: 4, maxBatchTokens: 16, maxQueue: 4, serverId: "p" };
    const pooled = createEngine({ ...o, runner: createPooledRunner(3) });
    expect(pooled.maxLen).toBe(6 * 4); // pools of 7, 7 and 6 blocks
    const plain = createEngine({ ...o, runner: createToyRunner({ vocabSize: V }) });
    expect(plain.maxLen).toBe(20 * 4);
    await Promise.all([pooled.close(), plain.close()]);
  });

  for (const seed of [1n, 2n, 3n, 4n]) {
    test(`shared prefixes under KV pressure: same outputs as one pool, seed ${seed}`, async () => {
      const rng = createRng(seed);
      const int = (lo: number, hi: number) => lo + Math.floor(rng.next() * (hi - lo + 1));
      const blockSize = int(2, 4);
      const numKvBlocks = int(30, 48);
      const opts = { blockSize, numKvBlocks, maxNumSeqs: int(4, 8), maxBatchTokens: int(16, 40), maxQueue: 64, specTokens: int(0, 1) * 2 };
      // Prompt + output <= 28 tokens: within the smallest maxLen (15 blocks of 2), so both engines cap nothing.
      const prefixes = Array.from({ length: 3 }, () => Array.from({ length: int(4, 10) }, () => int(0, V - 2)));
      const jobs: GenerateParams[] = Array.from({ length: 24 }, () => ({
        promptTokenIds: [...prefixes[int(0, 2)]!, ...Array.from({ length: int(1, 6) }, () => int(0, V - 2))],
        sampling: rng.next() < 0.3 ? { temperature: 0.8, seed: BigInt(int(0, 1e6)) } : undefined,
        stop: { maxTokens: int(4, 12), ignoreEos: true },
      }));
      const pooled = createPooledRunner(2);
      const two = await run(opts, pooled, jobs);
      const one = await run(opts, createToyRunner({ vocabSize: V }), jobs);
      expect(two.tokens).toEqual(one.tokens);
      expect(two.cached).toBeGreaterThan(0); // prefixes were reused within pools
      jobs.forEach((j, i) => {
        if (!j.sampling) expect(two.tokens[i]).toEqual(toyContinuation(j.promptTokenIds, j.stop!.maxTokens!, V));
      });
      // Both ranks worked, and no table ever left its pool (the runner would have thrown).
      expect(Math.min(...pooled.chunksPerRank)).toBeGreaterThan(0);
      for (const t of pooled.tablesSeen) expect(new Set([...t].map((b) => b % 2)).size).toBe(1);
    });
  }
});
