/**
 * Shared check for golden fixtures: runs a fixture's prompts through a real
 * ModelRunner (block size 4, scrambled block ids, all prompts batched, prefill
 * in 2 chunks, then batched greedy decoding) and compares with the reference.
 * Returns the max |logit diff| over every prompt position.
 */
import { expect } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { readSafetensorsHeader, readTensorF32 } from "../../loader/safetensors";
import type { ModelRunner, SeqChunk } from "../runner";

/** Block size of every golden run: small, so each prompt spans several blocks. */
export const BLOCK = 4;

export interface Golden {
  reference: string;
  cases: { prompt: number[]; greedy: number[] }[];
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/** Block ids for n sequences of up to maxLen tokens, scrambled so tables are not contiguous. */
export function blockTables(n: number, maxLen: number): Int32Array[] {
  const per = Math.ceil(maxLen / BLOCK);
  const ids = Array.from({ length: n * per }, (_, i) => i);
  let seed = 12345;
  for (let i = ids.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    const j = seed % (i + 1);
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  return Array.from({ length: n }, (_, s) => Int32Array.from(ids.slice(s * per, (s + 1) * per)));
}

/**
 * Prefill every prompt in two chunks, all prompts in each step, with logits at
 * every position: [prompt length, V] per case.
 */
export async function prefillInTwoChunks(runner: ModelRunner, cases: Golden["cases"], tables: Int32Array[]): Promise<Float32Array[]> {
  const V = runner.spec.vocabSize;
  const got: Float32Array[] = cases.map((c) => new Float32Array(c.prompt.length * V));
  const splits = cases.map((c) => Math.max(1, Math.floor(c.prompt.length / 2)));
  for (const half of [0, 1]) {
    const seqs: SeqChunk[] = cases.map((c, i) => {
      const from = half === 0 ? 0 : splits[i]!;
      const to = half === 0 ? splits[i]! : c.prompt.length;
      return { tokens: Int32Array.from(c.prompt.slice(from, to)), startPos: from, blockTable: tables[i]!, numLogits: to - from };
    });
    const out = await runner.forward({ seqs });
    out.forEach((l, i) => got[i]!.set(l, seqs[i]!.startPos * V));
  }
  return got;
}

export async function checkGolden(runner: ModelRunner, dir: string, tol: number, expectedFile: (i: number) => string, goldenFile = "golden.json") {
  const golden: Golden = JSON.parse(readFileSync(join(dir, goldenFile), "utf8"));
  const cases = golden.cases;
  const V = runner.spec.vocabSize;
  const maxLen = Math.max(...cases.map((c) => c.prompt.length + c.greedy.length));
  const tables = blockTables(cases.length, maxLen);
  runner.allocateKv(tables.length * tables[0]!.length, BLOCK);

  const got = await prefillInTwoChunks(runner, cases, tables);
  let maxDiff = 0;
  cases.forEach((c, i) => {
    const header = readSafetensorsHeader(expectedFile(i));
    const want = readTensorF32(header.tensors[`logits.${i}`]!);
    expect(want.length).toBe(c.prompt.length * V);
    for (let j = 0; j < want.length; j++) maxDiff = Math.max(maxDiff, Math.abs(want[j]! - got[i]![j]!));
  });
  expect(maxDiff).toBeLessThanOrEqual(tol);

  // Greedy decoding, all sequences in each step.
  const seqsOut = cases.map(() => [] as number[]);
  let next = cases.map((c, i) => argmax(got[i]!.subarray((c.prompt.length - 1) * V, c.prompt.length * V)));
  const steps = Math.max(...cases.map((c) => c.greedy.length));
  for (let s = 0; s < steps; s++) {
    const active = cases.map((c, i) => i).filter((i) => seqsOut[i]!.length < cases[i]!.greedy.length);
    active.forEach((i, k) => seqsOut[i]!.push(next[k]!));
    const still = active.filter((i) => seqsOut[i]!.length < cases[i]!.greedy.length);
    if (still.length === 0) break;
    const out = await runner.forward({
      seqs: still.map((i) => ({
        tokens: Int32Array.of(seqsOut[i]!.at(-1)!),
        startPos: cases[i]!.prompt.length + seqsOut[i]!.length - 1,
        blockTable: tables[i]!,
        numLogits: 1,
      })),
    });
    next = out.map(argmax);
  }
  cases.forEach((c, i) => expect(seqsOut[i]).toEqual(c.greedy));
  return maxDiff;
}

