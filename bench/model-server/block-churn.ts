/**
 * The KV block manager's host time per block once its prefix cache is full, so every new block
 * evicts the least recently used cached one: sequences of distinct --prompt-token prompts take
 * their blocks (matchPrefix, canAllocate, allocate), register them and release them, --seqs of
 * them after a warm-up that fills the cache. The H200 soak's pool is 50,620 blocks of 16 tokens
 * (docs/reliability.md, "The GPU soak").
 *
 *   bun bench/model-server/block-churn.ts [--blocks 50620] [--prompt 1024] [--seqs 20000]
 *
 * Prints one JSON line: microseconds per block (allocate + register + release, hashes
 * precomputed) and per sequence.
 */
import { parseArgs } from "node:util";
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { createBlockManager } from "../../model-server/src/engine/block-manager";

const { values: a } = parseArgs({ options: { blocks: { type: "string", default: "50620" }, prompt: { type: "string", default: "1024" }, seqs: { type: "string", default: "20000" } } });
const numBlocks = Number(a.blocks);
const perSeq = Math.ceil(Number(a.prompt) / 16);
const seqs = Number(a.seqs);
if (!(numBlocks > perSeq && perSeq >= 1 && seqs >= 1)) throw new Error("--blocks must exceed the prompt's blocks; --prompt, --seqs >= 1");
const bm = createBlockManager({ numBlocks, blockSize: 16 });
const root = rootHash("block-churn");
let next = 0;
/** A distinct prompt's block hashes. */
const prompt = () => hashBlocks(Uint32Array.from({ length: perSeq * 16 }, (_, i) => (next * 7919 + i) >>> 0), 16, root).slice(0, perSeq);
function run(n: number): number {
  const all = Array.from({ length: n }, () => (next++, prompt()));
  const t0 = performance.now();
  for (const hashes of all) {
    const table: number[] = [];
    const hits = bm.matchPrefix(hashes);
    if (!bm.canAllocate(0, hashes, hits, perSeq - hits)) throw new Error("no room");
    bm.allocate(table, hashes, hits, perSeq - hits);
    bm.register(table, hashes, 0, perSeq);
    bm.release(table);
  }
  return performance.now() - t0;
}
run(Math.ceil((2 * numBlocks) / perSeq)); // fill the cache, then evict through it once
const ms = run(seqs);
console.log(JSON.stringify({ kind: "block-churn", blocks: numBlocks, blocksPerSeq: perSeq, seqs, usPerBlock: +((ms * 1000) / (seqs * perSeq)).toFixed(3), usPerSeq: +((ms * 1000) / seqs).toFixed(1) }));
