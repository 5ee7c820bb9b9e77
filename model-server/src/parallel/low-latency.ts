/**
 * Low-latency dispatch/combine (decode; DeepEP's low-latency mode).
 *
 * Shapes are fixed by the capacity alone, never by the routing, so a CUDA graph
 * captured once replays for any routing: every rank receives into
 * [Le, cap, H] with cap = maxTokensPerRank * N (each source can send an expert
 * at most one row per token), and a count per local expert says how many of an
 * expert's cap rows are real (the grouped GEMM's masked layout).
 * Dispatch sends one row per (token, slot) to the rank serving it; combine sends
 * each expert output row back unweighted and the source reduces its k rows with
 * its own weights in ascending global expert order — the single-rank order, so
 * the result is bit-identical to the single-rank MoE.
 *
 * Row order inside an expert: source rank ascending, then token, then slot.
 *
 * Legend: T local tokens, k top-k, H hidden, Le local experts, N ranks, cap rows per expert.
 *
 * @example
 *   const { send, sent } = llDispatchSend(x, ids, k, H, layout, placement, maxTokensPerRank);
 *   const d = llDispatchRecv(transport.allToAllV(send), placement, rank, H, maxTokensPerRank);
 *   compute.run(experts, placement.localExperts(rank), d.xs, d.ys, d.begin, d.count);
 *   llCombineRecv(transport.allToAllV(llCombineSend(d, H)), sent, ids, weights, k, H, out);
 */
import { slotOrder } from "./high-throughput";
import { EpError } from "./errors";
import type { DispatchLayout } from "./layout";
import type { ExpertPlacement } from "./placement";
import { decodeMessage, encodeMessage } from "./wire";

export interface LlDispatched {
  /** [Le * cap, H]: expert le's rows are [le*cap, le*cap + count[le]). */
  xs: Float32Array;
  ys: Float32Array;
  cap: number;
  count: Int32Array;
  begin: Int32Array;
  /** [Le * N]: rows of expert le that came from rank s start at le*cap + srcStart[le*N + s]. */
  srcStart: Int32Array;
  srcCount: Int32Array;
  numRanks: number;
}

/** Per destination rank, the (token*k + slot) indices sent there, in the order their rows travel. */
export type LlSent = Int32Array[];

export function llCapacity(maxTokensPerRank: number, numRanks: number): number {
  return maxTokensPerRank * numRanks;
}

export function llDispatchSend(x: Float32Array, ids: Int32Array, k: number, H: number, layout: DispatchLayout, placement: ExpertPlacement, maxTokensPerRank: number): { send: Uint8Array[]; sent: LlSent } {
  const T = layout.numTokens;
  if (T > maxTokensPerRank) throw new EpError("capacity", `${T} tokens exceed the low-latency capacity of ${maxTokensPerRank} per rank`);
  if (x.length !== T * H) throw new EpError("bad_routing", `x holds ${x.length / H} rows, routing ${T} tokens`);
  const N = placement.numRanks;
  const per: number[][] = Array.from({ length: N }, () => []);
  for (let s = 0; s < T * k; s++) per[layout.slotRank[s]!]!.push(s);
  const sent: LlSent = per.map((slots, d) => {
    const le = (s: number) => placement.localIndex(d, ids[s]!);
    return Int32Array.from(slots.sort((a, b) => le(a) - le(b) || a - b));
  });
  const send = sent.map((slots, d) => {
    const ints = Int32Array.from(slots, (s) => placement.localIndex(d, ids[s]!));
    const floats = new Float32Array(slots.length * H);
    slots.forEach((s, i) => floats.set(x.subarray(Math.floor(s / k) * H, (Math.floor(s / k) + 1) * H), i * H));
    return encodeMessage(ints, floats);
  });
  return { send, sent };
}

export function llDispatchRecv(recv: Uint8Array[], placement: ExpertPlacement, rank: number, H: number, maxTokensPerRank: number): LlDispatched {
  const N = placement.numRanks;
  const Le = placement.localExperts(rank).length;
  const cap = llCapacity(maxTokensPerRank, N);
  const xs = new Float32Array(Le * cap * H);
  const count = new Int32Array(Le);
  const srcStart = new Int32Array(Le * N);
  const srcCount = new Int32Array(Le * N);
  recv.forEach((bytes, s) => {
    const m = decodeMessage(bytes);
    if (m.floats.length !== m.ints.length * H) throw new EpError("transport", `rank ${s} sent ${m.ints.length} rows with ${m.floats.length} values`);
    for (let le = 0; le < Le; le++) srcStart[le * N + s] = count[le]!;
    m.ints.forEach((le, i) => {
      if (!(le >= 0 && le < Le)) throw new EpError("transport", `rank ${rank} received local expert ${le} of ${Le}`);
      if (count[le]! >= cap) throw new EpError("capacity", `local expert ${le} of rank ${rank} received more than its ${cap} rows`);
      xs.set(m.floats.subarray(i * H, (i + 1) * H), (le * cap + count[le]!) * H);
      count[le]!++;
      srcCount[le * N + s]!++;
    });
  });
  return { xs, ys: new Float32Array(Le * cap * H), cap, count, begin: Int32Array.from({ length: Le }, (_, le) => le * cap), srcStart, srcCount, numRanks: N };
}

export function llCombineSend(d: LlDispatched, H: number): Uint8Array[] {
  const N = d.numRanks;
  const Le = d.count.length;
  return Array.from({ length: N }, (_, s) => {
    let n = 0;
    for (let le = 0; le < Le; le++) n += d.srcCount[le * N + s]!;
    const floats = new Float32Array(n * H);
    let at = 0;
    for (let le = 0; le < Le; le++) {
      const from = (le * d.cap + d.srcStart[le * N + s]!) * H;
      const len = d.srcCount[le * N + s]! * H;
      floats.set(d.ys.subarray(from, from + len), at);
      at += len;
    }
    return encodeMessage(new Int32Array(0), floats);
  });
}

/** out [T, H] = sum over each token's slots, ascending global expert id, of weight * returned row. */
export function llCombineRecv(recv: Uint8Array[], sent: LlSent, ids: Int32Array, weights: Float32Array, k: number, H: number, out: Float32Array): void {
  const T = ids.length / k;
  const rowOf: Float32Array[] = new Array(T * k);
  recv.forEach((bytes, d) => {
    const { floats } = decodeMessage(bytes);
    const slots = sent[d]!;
    if (floats.length !== slots.length * H) throw new EpError("transport", `rank ${d} returned ${floats.length / H} rows for ${slots.length} slots`);
    slots.forEach((s, i) => (rowOf[s] = floats.subarray(i * H, (i + 1) * H)));
  });
  out.fill(0);
  const order = new Int32Array(k);
  for (let t = 0; t < T; t++) {
    const m = slotOrder(ids, t * k, k, order);
    for (let q = 0; q < m; q++) {
      const s = t * k + order[q]!;
      const w = weights[s]!;
      const y = rowOf[s]!;
      for (let h = 0; h < H; h++) out[t * H + h] = out[t * H + h]! + w * y[h]!;
    }
  }
}
