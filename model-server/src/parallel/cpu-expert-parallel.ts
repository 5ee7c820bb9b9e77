/**
 * ExpertParallel over the CPU backend and any Transport: layout, dispatch,
 * this rank's experts (cpu-experts.ts), combine. One instance per rank.
 *
 * @example
 *   const ep = createCpuExpertParallel({ transport, placement, native: false, hidden: 64 });
 *   ep.beginStep({ mode: "high-throughput", maxTokensPerRank: 0 });
 *   ep.moe(x, experts, routing, out);
 */
import type { Tensor } from "../backend/backend";
import type { CpuTensor } from "../backend/cpu/cpu-backend";
import { createCpuExpertCompute } from "./cpu-experts";
import { EpError } from "./errors";
import type { EpStepConfig, ExpertParallel } from "./expert-parallel";
import { htCombineRecv, htCombineSend, htDispatchRecv, htDispatchSend } from "./high-throughput";
import { computeLayout } from "./layout";
import { llCombineRecv, llCombineSend, llDispatchRecv, llDispatchSend } from "./low-latency";
import type { ExpertPlacement } from "./placement";
import type { Transport } from "./transport";

export interface CpuExpertParallelOptions {
  transport: Transport;
  placement: ExpertPlacement;
  hidden: number;
  /** Native CPU kernels (must match the backend's choice for bit-identical rows). */
  native: boolean;
  /** Row alignment of each expert's group in high-throughput mode (1: dispatch's kernels; 128: DeepGEMM's). */
  align?: number;
}

export interface EpStats {
  /** Steps per mode and rows this rank computed. */
  htCalls: number;
  llCalls: number;
  rowsComputed: number;
}

export function createCpuExpertParallel(o: CpuExpertParallelOptions): ExpertParallel & { readonly stats: EpStats } {
  const { transport, placement, hidden: H } = o;
  if (transport.size !== placement.numRanks) throw new EpError("bad_placement", `placement over ${placement.numRanks} ranks, transport group of ${transport.size}`);
  const rank = transport.rank;
  const local = placement.localExperts(rank);
  const compute = createCpuExpertCompute(H, { native: o.native });
  const align = o.align ?? 1;
  let step: EpStepConfig = { mode: "high-throughput", maxTokensPerRank: 0 };
  const stats: EpStats = { htCalls: 0, llCalls: 0, rowsComputed: 0 };
  const data = (t: Tensor) => (t as CpuTensor).data;

  return {
    rank,
    size: transport.size,
    stats,
    beginStep(cfg) {
      if (cfg.mode === "low-latency" && !(cfg.maxTokensPerRank > 0)) throw new EpError("capacity", "low-latency mode needs maxTokensPerRank > 0");
      step = cfg;
    },
    moe(x, experts, routing, out) {
      if (x.cols !== H || out.cols !== H || out.rows !== x.rows) throw new EpError("bad_routing", `moe: x [${x.rows}, ${x.cols}], out [${out.rows}, ${out.cols}], hidden ${H}`);
      if (routing.ids.length !== x.rows * routing.topK) throw new EpError("bad_routing", `moe: ${routing.ids.length} routing ids for ${x.rows} tokens of top-${routing.topK}`);
      const k = routing.topK;
      const layout = computeLayout(routing.ids, k, placement, rank);
      const xd = data(x).subarray(0, x.rows * H);
      const od = data(out).subarray(0, out.rows * H);
      if (step.mode === "low-latency") {
        stats.llCalls++;
        const { send, sent } = llDispatchSend(xd, routing.ids, k, H, layout, placement, step.maxTokensPerRank);
        const d = llDispatchRecv(transport.allToAllV(send), placement, rank, H, step.maxTokensPerRank);
        compute.run(experts, local, d.xs, d.ys, d.begin, d.count);
        stats.rowsComputed += d.count.reduce((a, b) => a + b, 0);
        llCombineRecv(transport.allToAllV(llCombineSend(d, H)), sent, routing.ids, routing.weights, k, H, od);
      } else {
        stats.htCalls++;
        const d = htDispatchRecv(transport.allToAllV(htDispatchSend(xd, routing.ids, routing.weights, k, H, layout, placement)), placement, rank, H, k, align);
        compute.run(experts, local, d.xs, d.ys, d.begin, d.count);
        stats.rowsComputed += d.count.reduce((a, b) => a + b, 0);
        htCombineRecv(transport.allToAllV(htCombineSend(d, H)), layout, H, od);
      }
    },
  };
}
