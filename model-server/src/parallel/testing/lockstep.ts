/**
 * Test driver: N ranks' dispatch/combine phases run in lockstep on one thread,
 * with allToAllLockstep standing in for the network. Each rank has its own
 * tokens and routing; the result is each rank's combined output.
 */
import type { ExpertWeights } from "../../backend/backend";
import type { ExpertCompute } from "../expert-compute";
import { htCombineRecv, htCombineSend, htDispatchRecv, htDispatchSend, type HtDispatched } from "../high-throughput";
import { computeLayout, type DispatchLayout } from "../layout";
import { llCombineRecv, llCombineSend, llDispatchRecv, llDispatchSend, type LlDispatched, type LlSent } from "../low-latency";
import type { ExpertPlacement } from "../placement";
import { allToAllLockstep } from "../transport";

export interface RankInput {
  x: Float32Array;
  ids: Int32Array;
  weights: Float32Array;
}

export interface LockstepResult {
  out: Float32Array[];
  ht?: HtDispatched[];
  ll?: LlDispatched[];
}

export function runLockstep(mode: "high-throughput" | "low-latency", inputs: RankInput[], k: number, H: number, placement: ExpertPlacement, experts: ExpertWeights, compute: ExpertCompute, opts: { align?: number; maxTokensPerRank?: number } = {}): LockstepResult {
  const N = inputs.length;
  const layouts: DispatchLayout[] = inputs.map((inp, r) => computeLayout(inp.ids, k, placement, r));
  const out = inputs.map((inp) => new Float32Array(inp.x.length));
  if (mode === "high-throughput") {
    const recv = allToAllLockstep(inputs.map((inp, r) => htDispatchSend(inp.x, inp.ids, inp.weights, k, H, layouts[r]!, placement)));
    const ht = recv.map((msgs, r) => htDispatchRecv(msgs, placement, r, H, k, opts.align ?? 1));
    ht.forEach((d, r) => compute.run(experts, placement.localExperts(r), d.xs, d.ys, d.begin, d.count));
    const back = allToAllLockstep(ht.map((d) => htCombineSend(d, H)));
    back.forEach((msgs, r) => htCombineRecv(msgs, layouts[r]!, H, out[r]!));
    return { out, ht };
  }
  const cap = opts.maxTokensPerRank ?? Math.max(1, ...inputs.map((i) => i.ids.length / k));
  const sends = inputs.map((inp, r) => llDispatchSend(inp.x, inp.ids, k, H, layouts[r]!, placement, cap));
  const sent: LlSent[] = sends.map((s) => s.sent);
  const ll = allToAllLockstep(sends.map((s) => s.send)).map((msgs, r) => llDispatchRecv(msgs, placement, r, H, cap));
  ll.forEach((d, r) => compute.run(experts, placement.localExperts(r), d.xs, d.ys, d.begin, d.count));
  const back = allToAllLockstep(ll.map((d) => llCombineSend(d, H)));
  back.forEach((msgs, r) => llCombineRecv(msgs, sent[r]!, inputs[r]!.ids, inputs[r]!.weights, k, H, out[r]!));
  return { out, ll };
}
