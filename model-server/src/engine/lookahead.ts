/**
 * The decode step after the one in flight, planned before that step's tokens come back (overlapped decode steps).
 *
 * A runner that chains sampled steps (the CUDA runner: `chainsSampled`) can take a step whose token ids are read on
 * the GPU from the ids the previous step sampled. The engine then launches step N+1 while step N computes, and
 * the host's work between steps (results, streams, scheduling, packing: ~0.4 ms at batch 1 on the H200) runs
 * while the GPU computes instead of between steps.
 *
 * Pure: from the step in flight and the scheduler's state it decides whether such a step can be planned and which
 * chunks it holds; the engine allocates the blocks and launches it. It is planned only when nothing would be
 * decided differently with the tokens in hand:
 * - every running sequence is in the step in flight, sampled on the device (no host-sampled row, no verify step),
 *   bringing its last prompt or output token (a sequence mid-prefill keeps the scheduler's own order);
 * - a penalized sequence's counts are the host's (every generated token but the one in flight) and its input token,
 *   the one in flight, counts once more on the GPU (GpuSampling.penalizeInput);
 * - no waiting sequence could be admitted (the scheduler admits it at the next ordinary step);
 * - a sequence the step in flight ends for certain (its token limit, the context) or whose deadline has passed is
 *   left out; one that ends on a token it samples (EOS, a stop id) is computed one token too far, and the engine
 *   drops that token.
 *
 * @example
 * const la = planLookahead({ chunks, sampling, running: scheduler.running, canAdmit, maxLen, eosTokenIds, nowMs });
 * if (la) pending = runner.forwardSampled(inputOf(la.chunks), la.sampling, la.fromRow);
 */
import { bannedTokens } from "./accept";
import type { BlockManager } from "./block-manager";
import { penaltyPairs, type GpuSampling } from "./gpu-sampling";
import type { ScheduledChunk } from "./scheduler";
import { numGenerated, type Sequence } from "./sequence";

export interface LookaheadInput {
  /** The step in flight. */
  chunks: readonly ScheduledChunk[];
  /** Its device sampling (planDeviceSampling), or null: a logits step. */
  sampling: readonly GpuSampling[] | null;
  running: readonly Sequence[];
  /** A waiting sequence could join the next step (a batch slot is free). */
  canAdmit: boolean;
  maxLen: number;
  eosTokenIds: readonly number[];
  nowMs: number;
}

export interface Lookahead {
  /** One single-token chunk per sequence, its token a placeholder until the step in flight returns. */
  chunks: ScheduledChunk[];
  /** Per chunk: the logits row of the step in flight whose sampled id is its token. */
  fromRow: Int32Array;
  sampling: GpuSampling[];
}

/** The token a lookahead chunk carries until the host knows it (any valid id: the GPU replaces it). */
export const PLACEHOLDER_TOKEN = 0;

export function planLookahead(inp: LookaheadInput): Lookahead | null {
  if (!inp.sampling || inp.canAdmit) return null;
  const inFlight = new Map<Sequence, { chunk: ScheduledChunk; sampling: GpuSampling; row: number }>();
  let row = 0;
  for (let i = 0; i < inp.chunks.length; i++) {
    const c = inp.chunks[i]!;
    const g = inp.sampling[i]!;
    if (c.numLogits !== 1 || c.numDraft !== 0 || g.host) return null;
    inFlight.set(c.seq, { chunk: c, sampling: g, row });
    row += c.numLogits;
  }
  const chunks: ScheduledChunk[] = [];
  const fromRow: number[] = [];
  const sampling: GpuSampling[] = [];
  for (const seq of inp.running) {
    const f = inFlight.get(seq);
    if (!f) return null;
    if (seq.status !== "running") continue;
    const start = f.chunk.start + f.chunk.tokens.length;
    if (seq.tokens.length !== start) return null; // not the token the step in flight samples next
    const generated = numGenerated(seq) + 1; // after the token in flight
    if (generated >= seq.stop.maxTokens || seq.tokens.length + 1 >= inp.maxLen) continue;
    if (seq.deadlineMs > 0 && inp.nowMs >= seq.deadlineMs) continue;
    chunks.push({ seq, start, tokens: [PLACEHOLDER_TOKEN], numLogits: 1, numDraft: 0 });
    fromRow.push(f.row);
    const next: GpuSampling = { ...f.sampling, step: f.sampling.step + 1, banned: bannedTokens(seq, inp.eosTokenIds, generated) };
    // penalties: the host's counts miss exactly the token in flight, which is this step's input (read on the GPU)
    if (next.frequencyPenalty || next.presencePenalty) Object.assign(next, { penalties: penaltyPairs(seq.counts), penalizeInput: true });
    sampling.push(next);
  }
  return chunks.length > 0 ? { chunks, fromRow: Int32Array.from(fromRow), sampling } : null;
}

/**
 * Allocate, from free blocks only, the block each lookahead chunk's position needs; on success an undo that gives
 * them back (the launch was refused), on failure null with nothing allocated (the next ordinary step makes room or
 * preempts).
 */
export function reserveLookaheadBlocks(chunks: readonly ScheduledChunk[], bm: BlockManager): (() => void) | null {
  const grown: { seq: Sequence; blocks: number }[] = [];
  const undo = () => {
    for (const g of grown) bm.truncate(g.seq.blockTable, g.blocks);
  };
  for (const c of chunks) {
    const fresh = Math.ceil((c.start + 1) / bm.blockSize) - c.seq.blockTable.length;
    if (fresh <= 0) continue;
    const blocks = c.seq.blockTable.length;
    if (!bm.allocate(c.seq.blockTable, c.seq.blockHashes, 0, fresh)) {
      undo();
      return null;
    }
    grown.push({ seq: c.seq, blocks });
  }
  return undo;
}
