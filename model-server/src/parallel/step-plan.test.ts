import { describe, expect, test } from "bun:test";
import { decodeStepPlan, encodeStepPlan, planStep } from "./step-plan";

const seq = (tokens: number[], startPos: number, blocks: number[], numLogits = 1) => ({ tokens: Int32Array.from(tokens), startPos, blockTable: Int32Array.from(blocks), numLogits });

describe("step plan", () => {
  const step = { seqs: [seq([1, 2, 3], 0, [4]), seq([5], 7, [3, 9]), seq([6, 7], 2, [6, 2]), seq([8], 0, [1])] };
  test("sequences go to blockTable[0] mod N; the mode follows the largest share", () => {
    const p = planStep(step, 2, { lowLatencyMaxTokens: 8 });
    expect(p.ranks.map((r) => r.seqIndex)).toEqual([[0, 2], [1, 3]]);
    expect(p.ranks.map((r) => r.tokens)).toEqual([5, 2]);
    expect(p.mode).toBe("low-latency");
    expect(p.maxTokensPerRank).toBe(8); // the constant capacity, not this step's share
    const big = planStep(step, 2, { lowLatencyMaxTokens: 4 });
    expect(big.mode).toBe("high-throughput");
    expect(big.maxTokensPerRank).toBe(5);
    expect(planStep(step, 4, { lowLatencyMaxTokens: 8 }).ranks.map((r) => r.seqIndex)).toEqual([[0], [3], [2], [1]]);
  });
  test("encode/decode round-trips; a truncated plan is a clear error", () => {
    const p = planStep(step, 3, { lowLatencyMaxTokens: 2 });
    const back = decodeStepPlan(encodeStepPlan(p));
    expect(back).toEqual(p);
    const enc = encodeStepPlan(p);
    expect(() => decodeStepPlan(enc.subarray(0, enc.length - 2))).toThrow(/step plan/);
    expect(() => decodeStepPlan(Int32Array.from([...enc, 0]))).toThrow(/trailing/);
  });
});
