/**
 * The grouped expert computation a rank runs between dispatch and combine, in
 * the grouped GEMM's row contract (kernels/src/common/rows.h): local expert le's
 * rows are [begin[le], begin[le] + count[le]) of xs [M, H]; every other row of ys
 * is left as it is. Contiguous layout: begin = offsets. Masked: begin = le * cap.
 *
 * Legend: M rows, H hidden, Le local experts.
 *
 * @example
 *   compute.run(experts, localExperts, xs, ys, begin, count);  // ys[rows of le] = expert_le(xs[rows of le])
 */
import type { ExpertWeights } from "../backend/backend";

export interface ExpertCompute {
  readonly hidden: number;
  run(experts: ExpertWeights, localExperts: readonly number[], xs: Float32Array, ys: Float32Array, begin: Int32Array, count: Int32Array): void;
}
