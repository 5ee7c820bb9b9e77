/**
 * Two paths of the CUDA backend compared step by step on one sequence (GPU tests: moe-block.test.ts):
 * `decode` prefills a prompt and runs single-token steps (graphs after the first), feeding the given tokens or its
 * own greedy ones; `compareLogits` asserts bf16-level agreement: max |diff| <= 2% of the largest |logit| at >= 90%
 * of the steps, and the argmax at >= 95% of the steps where the reference's top two are further apart than that
 * (a near-tie in router scores may pick another expert in a step and move it far more); `expectSameBits` asserts
 * two runs' logits are the same bits step by step.
 */
import { expect } from "bun:test";
import type { CudaModelRunner } from "../cuda-runner";
import { top2 } from "./top2";

const BLOCK = 16;

/** The block table `decode` gives a prompt of `promptLen` tokens and `steps` decode steps (blocks 0, 1, ...). */
export function decodeTable(promptLen: number, steps: number): Int32Array {
  return Int32Array.from({ length: Math.ceil((promptLen + steps + 1) / BLOCK) }, (_, i) => i);
}

/** Prompt prefill, then `steps` single-token steps feeding `feed` (or the run's own greedy tokens): logits per step. */
export async function decode(runner: CudaModelRunner, prompt: number[], steps: number, feed?: number[]): Promise<{ logits: Float32Array[]; tokens: number[] }> {
  const table = decodeTable(prompt.length, steps);
  runner.allocateKv(table.length, BLOCK);
  const V = runner.spec.vocabSize;
  const [first] = await runner.forward({ seqs: [{ tokens: Int32Array.from(prompt), startPos: 0, blockTable: table, numLogits: 1 }] });
  const logits = [first!.slice(0, V)];
  const tokens: number[] = [];
  for (let s = 0; s < steps; s++) {
    const tok = feed ? feed[s]! : top2(logits.at(-1)!).best;
    tokens.push(tok);
    const [out] = await runner.forward({ seqs: [{ tokens: Int32Array.of(tok), startPos: prompt.length + s, blockTable: table, numLogits: 1 }] });
    logits.push(out!.slice(0, V));
  }
  return { logits, tokens };
}

export function compareLogits(tag: string, name: string, chain: Float32Array[], block: Float32Array[]): void {
  let scale = 0;
  for (const row of chain) for (const v of row) scale = Math.max(scale, Math.abs(v));
  const tol = 0.02 * scale;
  let worst = 0;
  let within = 0;
  let clear = 0;
  let agree = 0;
  const perStep: string[] = [];
  chain.forEach((row, s) => {
    const b = block[s]!;
    let w = 0;
    for (let j = 0; j < row.length; j++) w = Math.max(w, Math.abs(row[j]! - b[j]!));
    perStep.push(w.toFixed(4));
    worst = Math.max(worst, w);
    if (w <= tol) within++;
    const ref = top2(row);
    if (ref.gap > tol) {
      clear++;
      if (top2(b).best === ref.best) agree++;
    }
  });
  console.error(
    `[${tag}] ${name}: ${within}/${chain.length} steps within ${tol.toFixed(4)} (max |diff| ${worst.toFixed(5)}), argmax ${agree}/${clear} clear steps; per step ${perStep.join(" ")}`,
  );
  expect(within).toBeGreaterThanOrEqual(Math.ceil(0.9 * chain.length));
  expect(agree).toBeGreaterThanOrEqual(Math.floor(0.95 * clear));
}

/** Each of `runs`' logits rows is the same bits as `reference`'s row at that step. */
export function expectSameBits(runs: Float32Array[], reference: Float32Array[]): void {
  const bytes = (r: Float32Array) => Buffer.from(r.buffer, r.byteOffset, r.byteLength);
  runs.forEach((row, s) => expect(bytes(row).equals(bytes(reference[s]!))).toBe(true));
}
