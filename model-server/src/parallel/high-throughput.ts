/**
 * High-throughput dispatch/combine (prefill; DeepEP's "normal" mode).
 *
 * Dispatch: each token goes once to every rank that serves one of its choices,
 * with its k slots (local expert index there, or -1) and weights. The receiver
 * expands what arrived into contiguous per-expert rows, each expert's group
 * starting at a multiple of `align` (DeepGEMM's contiguous layout wants 128;
 * dispatch's own kernels take 1), padding rows zero.
 * Combine: the receiver reduces each received token's local slots, weighted, in
 * ascending global expert order, and sends one partial row back per token; the
 * source sums the partials of the ranks it sent to, in ascending rank order.
 *
 * Receive order (fixed, so results are deterministic): source rank ascending,
 * then the source's token order; inside an expert the rows keep that order.
 *
 * Legend: T local tokens, k top-k, H hidden, R received tokens, M rows after
 * expansion (padded), Le local experts, N ranks.
 *
 * @example
 *   const send = htDispatchSend(x, ids, weights, k, H, layout, placement);      // per dest rank
 *   const d = htDispatchRecv(transport.allToAllV(send), placement, rank, H, k, 1);
 *   compute.run(experts, placement.localExperts(rank), d.xs, d.ys, d.begin, d.count);
 *   const back = htCombineSend(d, H);                                            // per source rank
 *   htCombineRecv(transport.allToAllV(back), layout, H, out);                    // out [T, H]
 */
import { EpError } from "./errors";
import type { DispatchLayout } from "./layout";
import type { ExpertPlacement } from "./placement";
import { decodeMessage, encodeMessage } from "./wire";

export interface HtDispatched {
  /** [M, H] rows grouped by local expert, groups aligned; ys [M, H] receives the expert outputs. */
  xs: Float32Array;
  ys: Float32Array;
  /** [Le+1] group starts (aligned), last = M. */
  offsets: Int32Array;
  /** [Le] group starts and real row counts (the grouped GEMM's view). */
  begin: Int32Array;
  count: Int32Array;
  /** Tokens received from each source rank (combine returns as many rows to it). */
  recvPerSrc: Int32Array;
  /** [R*k] row of each received (token, slot), -1 where the slot is served elsewhere. */
  slotRow: Int32Array;
  /** [R*k] weights and global expert ids of the received slots. */
  slotWeight: Float32Array;
  slotExpert: Int32Array;
  topK: number;
}

export function htDispatchSend(x: Float32Array, ids: Int32Array, weights: Float32Array, k: number, H: number, layout: DispatchLayout, placement: ExpertPlacement): Uint8Array[] {
  if (x.length !== layout.numTokens * H) throw new EpError("bad_routing", `x holds ${x.length / H} rows, routing ${layout.numTokens} tokens`);
  return layout.sendTokens.map((tokens, d) => {
    const ints = new Int32Array(tokens.length * k);
    const floats = new Float32Array(tokens.length * (H + k));
    tokens.forEach((t, i) => {
      floats.set(x.subarray(t * H, (t + 1) * H), i * (H + k));
      for (let j = 0; j < k; j++) {
        const s = t * k + j;
        ints[i * k + j] = layout.slotRank[s] === d ? placement.localIndex(d, ids[s]!) : -1;
        floats[i * (H + k) + H + j] = weights[s]!;
      }
    });
    return encodeMessage(ints, floats);
  });
}

export function htDispatchRecv(recv: Uint8Array[], placement: ExpertPlacement, rank: number, H: number, k: number, align: number): HtDispatched {
  const local = placement.localExperts(rank);
  const Le = local.length;
  const msgs = recv.map(decodeMessage);
  const recvPerSrc = Int32Array.from(msgs, (m) => m.ints.length / k);
  const R = recvPerSrc.reduce((a, b) => a + b, 0);
  // Pass 1: rows per local expert -> aligned offsets.
  const count = new Int32Array(Le);
  for (const m of msgs) {
    for (const le of m.ints) {
      if (le < -1 || le >= Le) throw new EpError("transport", `rank ${rank} received local expert ${le} of ${Le}`);
      if (le >= 0) count[le]!++;
    }
  }
  const offsets = new Int32Array(Le + 1);
  for (let le = 0; le < Le; le++) offsets[le + 1] = offsets[le]! + Math.ceil(count[le]! / align) * align;
  const M = offsets[Le]!;
  const xs = new Float32Array(M * H);
  const slotRow = new Int32Array(R * k).fill(-1);
  const slotWeight = new Float32Array(R * k);
  const slotExpert = new Int32Array(R * k).fill(-1);
  const next = offsets.slice(0, Le);
  let r = 0;
  for (const m of msgs) {
    const n = m.ints.length / k;
    for (let i = 0; i < n; i++, r++) {
      const row = m.floats.subarray(i * (H + k), i * (H + k) + H);
      for (let j = 0; j < k; j++) {
        slotWeight[r * k + j] = m.floats[i * (H + k) + H + j]!;
        const le = m.ints[i * k + j]!;
        if (le < 0) continue;
        const at = next[le]!++;
        xs.set(row, at * H);
        slotRow[r * k + j] = at;
        slotExpert[r * k + j] = local[le]!;
      }
    }
  }
  return { xs, ys: new Float32Array(M * H), offsets, begin: offsets.slice(0, Le), count, recvPerSrc, slotRow, slotWeight, slotExpert, topK: k };
}

/** Slots of one token in ascending global expert order (ties: slot order), the single-rank sum order. */
export function slotOrder(experts: Int32Array, base: number, k: number, into: Int32Array): number {
  let n = 0;
  for (let j = 0; j < k; j++) {
    if (experts[base + j]! < 0) continue;
    let p = n++;
    while (p > 0 && experts[base + into[p - 1]!]! > experts[base + j]!) {
      into[p] = into[p - 1]!;
      p--;
    }
    into[p] = j;
  }
  return n;
}

export function htCombineSend(d: HtDispatched, H: number): Uint8Array[] {
  const k = d.topK;
  const order = new Int32Array(k);
  let r = 0;
  return Array.from(d.recvPerSrc, (n) => {
    const partial = new Float32Array(n * H);
    for (let i = 0; i < n; i++, r++) {
      const m = slotOrder(d.slotExpert, r * k, k, order);
      for (let q = 0; q < m; q++) {
        const j = order[q]!;
        const w = d.slotWeight[r * k + j]!;
        const y = d.slotRow[r * k + j]! * H;
        for (let h = 0; h < H; h++) partial[i * H + h] = partial[i * H + h]! + w * d.ys[y + h]!;
      }
    }
    return encodeMessage(new Int32Array(0), partial);
  });
}

/** out [T, H] = sum over ranks (ascending) of the partial rows they returned. */
export function htCombineRecv(recv: Uint8Array[], layout: DispatchLayout, H: number, out: Float32Array): void {
  out.fill(0);
  recv.forEach((bytes, s) => {
    const { floats } = decodeMessage(bytes);
    const tokens = layout.sendTokens[s]!;
    if (floats.length !== tokens.length * H) throw new EpError("transport", `rank ${s} returned ${floats.length / H} rows for ${tokens.length} tokens`);
    tokens.forEach((t, i) => {
      for (let h = 0; h < H; h++) out[t * H + h] = out[t * H + h]! + floats[i * H + h]!;
    });
  });
}
