/**
 * The hook the MoE layer delegates to when experts are spread over ranks:
 * out = sum_k w_k expert_k(x) for this rank's tokens, computed by dispatching
 * the tokens to the ranks that hold their experts and combining the results.
 * Collective: every rank calls moe() for every MoE layer of every step, in the
 * same order, with x of 0 rows when it has no tokens this step.
 *
 * The mode is the whole group's choice for a step (rank 0 puts it in the step
 * plan): "high-throughput" for prefill-sized steps, "low-latency" (fixed shapes)
 * when every rank has at most `maxTokensPerRank` tokens.
 *
 * @example
 *   const ep = createCpuExpertParallel({ transport, placement, native: be.native, hidden: H });
 *   ep.beginStep({ mode: "low-latency", maxTokensPerRank: 8 });
 *   const model = createMoeModel(config, weights, be, { expertParallel: ep });
 */
import type { ExpertWeights, Routing, Tensor } from "../backend/backend";

export type EpMode = "high-throughput" | "low-latency";

export interface EpStepConfig {
  mode: EpMode;
  /** Low-latency capacity per rank (tokens); the step plan sets it from the largest rank's share. */
  maxTokensPerRank: number;
}

export interface ExpertParallel {
  readonly rank: number;
  readonly size: number;
  beginStep(cfg: EpStepConfig): void;
  /** out[T, H] = sum over k of weight * expert(x) (SwiGLU experts), experts spread over the group. */
  moe(x: Tensor, experts: ExpertWeights, routing: Routing, out: Tensor): void;
}
