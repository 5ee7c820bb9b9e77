/**
 * A fixed batch of four short prompts stepped by hand through a runner (GPU tests of chained and overlapped steps:
 * model/cuda-overlap.test.ts, engine/engine-cuda.test.ts): each sequence owns 4 blocks of its own; `prefillStep` is
 * the batch's prompts in one step, `decodeStep(i, tokens)` its i-th one-token step after them.
 */
import type { StepInput } from "../runner";

export const DECODE_PROMPTS: readonly number[][] = [
  [5, 17, 33, 9],
  [2, 4, 8, 16, 32, 64],
  [7, 7, 7],
  [100, 3, 41, 22, 5],
];

/** Blocks the batch needs (4 per sequence). */
export const DECODE_BATCH_BLOCKS = DECODE_PROMPTS.length * 4;

const tables = DECODE_PROMPTS.map((_, s) => Int32Array.from({ length: 4 }, (_, i) => s * 4 + i));

export const prefillStep = (): StepInput => ({
  seqs: DECODE_PROMPTS.map((p, s) => ({ tokens: Int32Array.from(p), startPos: 0, blockTable: tables[s]!, numLogits: 1 })),
});

export const decodeStep = (step: number, tokens: readonly number[]): StepInput => ({
  seqs: DECODE_PROMPTS.map((p, s) => ({ tokens: Int32Array.of(tokens[s]!), startPos: p.length + step, blockTable: tables[s]!, numLogits: 1 })),
});
