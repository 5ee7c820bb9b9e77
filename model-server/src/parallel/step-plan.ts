/**
 * Rank 0's step plan: which rank runs which sequences this step, and the
 * dispatch mode the whole group uses. Followers run exactly what the plan says.
 *
 * Rule (pure): sequence -> rank = blockTable[0] mod N. A sequence's first block
 * stays the same for its whole life, so its KV stays on one rank (on GPUs each
 * rank holds the KV of its own sequences; sequences sharing a prefix share their
 * first block and land together). Mode: "low-latency" when every rank's share is
 * at most `lowLatencyMaxTokens` (a constant, so the low-latency buffers keep one
 * shape for the server's life: CUDA-graph safe), "high-throughput" otherwise.
 *
 * The plan travels as one Int32Array (encodeStepPlan) so a follower can take it
 * from any byte transport (postMessage here; an NCCL broadcast on GPUs).
 *
 * @example
 *   const plan = planStep(step, 2, { lowLatencyMaxTokens: 128 });
 *   plan.ranks[1].seqs;        // rank 1's SeqChunks; plan.ranks[1].seqIndex maps them back into step.seqs
 *   decodeStepPlan(encodeStepPlan(plan));  // same plan
 */
import type { SeqChunk, StepInput } from "../model/runner";
import { EpError } from "./errors";
import type { EpMode } from "./expert-parallel";

export interface RankStep {
  /** Index in the step's seqs of each sequence this rank runs. */
  seqIndex: number[];
  seqs: SeqChunk[];
  tokens: number;
}

export interface StepPlan {
  mode: EpMode;
  maxTokensPerRank: number;
  ranks: RankStep[];
}

export function planStep(step: StepInput, numRanks: number, o: { lowLatencyMaxTokens: number }): StepPlan {
  const ranks: RankStep[] = Array.from({ length: numRanks }, () => ({ seqIndex: [], seqs: [], tokens: 0 }));
  step.seqs.forEach((s, i) => {
    const first = s.blockTable[0] ?? 0;
    const r = ranks[((first % numRanks) + numRanks) % numRanks]!;
    r.seqIndex.push(i);
    r.seqs.push(s);
    r.tokens += s.tokens.length;
  });
  const most = Math.max(0, ...ranks.map((r) => r.tokens));
  const ll = most <= o.lowLatencyMaxTokens;
  return { mode: ll ? "low-latency" : "high-throughput", maxTokensPerRank: ll ? o.lowLatencyMaxTokens : most, ranks };
}

// Layout: [mode, maxTokensPerRank, N, per rank: nSeqs, per seq: index, startPos, numLogits, nTokens, tokens..., nBlocks, blocks...]
export function encodeStepPlan(plan: StepPlan): Int32Array {
  const out: number[] = [plan.mode === "low-latency" ? 1 : 0, plan.maxTokensPerRank, plan.ranks.length];
  for (const r of plan.ranks) {
    out.push(r.seqs.length);
    r.seqs.forEach((s, i) => {
      out.push(r.seqIndex[i]!, s.startPos, s.numLogits, s.tokens.length, ...s.tokens, s.blockTable.length, ...s.blockTable);
    });
  }
  return Int32Array.from(out);
}

export function decodeStepPlan(a: Int32Array): StepPlan {
  let at = 0;
  const next = () => {
    if (at >= a.length) throw new EpError("transport", `step plan ends early at ${at} of ${a.length} values`);
    return a[at++]!;
  };
  const take = (n: number) => {
    if (n < 0 || at + n > a.length) throw new EpError("transport", `step plan names ${n} values past its end`);
    const v = a.slice(at, at + n);
    at += n;
    return v;
  };
  const mode: EpMode = next() === 1 ? "low-latency" : "high-throughput";
  const maxTokensPerRank = next();
  const N = next();
  const ranks: RankStep[] = [];
  for (let r = 0; r < N; r++) {
    const n = next();
    const rs: RankStep = { seqIndex: [], seqs: [], tokens: 0 };
    for (let i = 0; i < n; i++) {
      rs.seqIndex.push(next());
      const startPos = next();
      const numLogits = next();
      const tokens = take(next());
      const blockTable = take(next());
      rs.seqs.push({ tokens, startPos, numLogits, blockTable });
      rs.tokens += tokens.length;
    }
    ranks.push(rs);
  }
  if (at !== a.length) throw new EpError("transport", `step plan has ${a.length - at} trailing values`);
  return { mode, maxTokensPerRank, ranks };
}
