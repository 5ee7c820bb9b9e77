/**
 * The layout step (DeepEP's get_dispatch_layout): from one rank's routing, where
 * each (token, slot) goes, how many tokens each rank receives and how many rows
 * each expert gets. Pure; both dispatch modes start from it.
 *
 * Legend: T local tokens, k top-k, N ranks, E experts.
 *
 * @example
 *   const lay = computeLayout(routing.ids, 2, placement, 0);
 *   lay.numTokensPerRank;     // Int32Array [N]: tokens sent to each rank (a token counts once per rank)
 *   lay.sendTokens[1];        // Int32Array: local token indices sent to rank 1, ascending
 */
import { EpError } from "./errors";
import type { ExpertPlacement } from "./placement";

export interface DispatchLayout {
  readonly numTokens: number;
  readonly topK: number;
  /** [T*k] rank that serves each (token, slot). */
  readonly slotRank: Int32Array;
  /** [N] distinct tokens sent to each rank. */
  readonly numTokensPerRank: Int32Array;
  /** [E] (token, slot) pairs routed to each expert. */
  readonly numTokensPerExpert: Int32Array;
  /** [T*N] 1 where token t goes to rank r (DeepEP's is_token_in_rank). */
  readonly isTokenInRank: Uint8Array;
  /** Per rank, the local tokens sent there, ascending (the send order of both modes). */
  readonly sendTokens: Int32Array[];
}

export function computeLayout(ids: Int32Array, topK: number, placement: ExpertPlacement, srcRank: number): DispatchLayout {
  const N = placement.numRanks;
  const E = placement.numExperts;
  if (!(topK > 0) || ids.length % topK !== 0) throw new EpError("bad_routing", `${ids.length} routing ids are not a multiple of top-k ${topK}`);
  if (srcRank < 0 || srcRank >= N) throw new EpError("bad_routing", `rank ${srcRank} outside a group of ${N}`);
  const T = ids.length / topK;
  const slotRank = new Int32Array(T * topK);
  const numTokensPerRank = new Int32Array(N);
  const numTokensPerExpert = new Int32Array(E);
  const isTokenInRank = new Uint8Array(T * N);
  for (let t = 0; t < T; t++) {
    for (let j = 0; j < topK; j++) {
      const e = ids[t * topK + j]!;
      if (!(e >= 0 && e < E)) throw new EpError("bad_routing", `token ${t} slot ${j} routes to expert ${e}, outside [0, ${E})`);
      const r = placement.target(e, srcRank, t);
      slotRank[t * topK + j] = r;
      numTokensPerExpert[e]!++;
      if (isTokenInRank[t * N + r] === 0) {
        isTokenInRank[t * N + r] = 1;
        numTokensPerRank[r]!++;
      }
    }
  }
  const sendTokens = Array.from({ length: N }, (_, r) => new Int32Array(numTokensPerRank[r]!));
  const fill = new Int32Array(N);
  for (let t = 0; t < T; t++) for (let r = 0; r < N; r++) if (isTokenInRank[t * N + r]) sendTokens[r]![fill[r]!++] = t;
  return { numTokens: T, topK, slotRank, numTokensPerRank, numTokensPerExpert, isTokenInRank, sendTokens };
}
