/**
 * Expert-to-rank placement. Each expert has one or more replicas (ranks that hold
 * its weights); each rank holds an ordered list of local experts. Placements may be
 * uneven (rank 0 holds 3 experts, rank 1 holds 5). Replication of hot experts is
 * expressed by listing an expert on several ranks: the layout step then picks one
 * replica per (source rank, token) with a fixed rule, so every rank agrees without
 * talking and the choice is reproducible.
 *
 * Legend: E experts, N ranks, Le local experts of one rank.
 *
 * @example
 *   const p = createContiguousPlacement(64, 2);           // experts 0..31 on rank 0, 32..63 on rank 1
 *   const q = createPlacement(8, [[0, 1, 2], [3, 4, 5, 6, 7]]); // uneven
 *   const r = createPlacement(4, [[0, 1, 3], [2, 3]]);    // expert 3 replicated on both ranks
 *   q.replicas(4); // [1]
 */
import { EpError } from "./errors";

export interface ExpertPlacement {
  readonly numExperts: number;
  readonly numRanks: number;
  /** Global expert ids held by `rank`, in local order (local index = position). */
  localExperts(rank: number): readonly number[];
  /** Ranks holding expert e (ascending). */
  replicas(e: number): readonly number[];
  /** Local index of expert e on `rank`, or -1 when that rank does not hold it. */
  localIndex(rank: number, e: number): number;
  /** The replica that serves (srcRank, token)'s choice of e: fixed, so all ranks agree. */
  target(e: number, srcRank: number, token: number): number;
  /** True when every expert has one replica and rank r's experts all precede rank r+1's. */
  readonly contiguous: boolean;
}

/** A placement from each rank's list of global expert ids (lists may overlap: replicas). */
export function createPlacement(numExperts: number, ranks: number[][]): ExpertPlacement {
  const N = ranks.length;
  if (!(Number.isInteger(numExperts) && numExperts > 0)) throw new EpError("bad_placement", `numExperts must be a positive integer, got ${numExperts}`);
  if (N === 0) throw new EpError("bad_placement", "a placement needs at least one rank");
  const reps: number[][] = Array.from({ length: numExperts }, () => []);
  const index: Int32Array[] = ranks.map(() => new Int32Array(numExperts).fill(-1));
  ranks.forEach((list, r) => {
    list.forEach((e, i) => {
      if (!Number.isInteger(e) || e < 0 || e >= numExperts) throw new EpError("bad_placement", `rank ${r} lists expert ${e}, outside [0, ${numExperts})`);
      if (index[r]![e] !== -1) throw new EpError("bad_placement", `rank ${r} lists expert ${e} twice`);
      index[r]![e] = i;
      reps[e]!.push(r);
    });
  });
  const missing = reps.findIndex((r) => r.length === 0);
  if (missing >= 0) throw new EpError("bad_placement", `expert ${missing} is on no rank`);
  let contiguous = reps.every((r) => r.length === 1);
  let last = -1;
  for (const list of ranks) {
    for (const e of list) {
      if (e < last) contiguous = false;
      last = e;
    }
  }
  const frozen = ranks.map((l) => Object.freeze([...l]));
  return {
    numExperts,
    numRanks: N,
    contiguous,
    localExperts: (rank) => frozen[rank] ?? [],
    replicas: (e) => reps[e]!,
    localIndex: (rank, e) => index[rank]?.[e] ?? -1,
    // One replica: that rank. Several: spread by source rank and token so a hot expert's load
    // divides over its replicas; pure arithmetic so every rank computes the same answer.
    target: (e, srcRank, token) => {
      const r = reps[e]!;
      return r.length === 1 ? r[0]! : r[(srcRank + token) % r.length]!;
    },
  };
}

/**
 * Experts split into N consecutive ranges. `sizes` makes it uneven (sizes sum to E);
 * by default ranges differ by at most one expert, the larger ranges first.
 */
export function createContiguousPlacement(numExperts: number, numRanks: number, sizes?: number[]): ExpertPlacement {
  const n = sizes ?? Array.from({ length: numRanks }, (_, r) => Math.floor(numExperts / numRanks) + (r < numExperts % numRanks ? 1 : 0));
  if (n.length !== numRanks || n.reduce((a, b) => a + b, 0) !== numExperts || n.some((s) => !Number.isInteger(s) || s < 0)) {
    throw new EpError("bad_placement", `sizes [${n.join(", ")}] do not split ${numExperts} experts over ${numRanks} ranks`);
  }
  let at = 0;
  return createPlacement(
    numExperts,
    n.map((s) => Array.from({ length: s }, () => at++)),
  );
}
