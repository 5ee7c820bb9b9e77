/**
 * The CPU backend's expert computation on grouped rows: per local expert,
 * gate_up GEMM, SiLU-and-multiply, down GEMM, with the same kernels the CPU
 * backend's moe() uses (native when it is, TypeScript otherwise), so one row's
 * result is bit-identical to the single-rank path.
 *
 * @example
 *   const compute = createCpuExpertCompute(64, { native: be.native });
 */
import type { ExpertWeights } from "../backend/backend";
import * as ref from "../backend/cpu/kernels";
import { loadNativeKernels } from "../backend/cpu/native";
import { EpError } from "./errors";
import type { ExpertCompute } from "./expert-compute";

interface CpuExpertData extends ExpertWeights {
  /** [E, 2I, H] */
  gateUp: Float32Array;
  /** [E, H, I] */
  down: Float32Array;
}

function cpuData(w: ExpertWeights): CpuExpertData {
  const d = w as Partial<CpuExpertData>;
  if (!(d.gateUp instanceof Float32Array && d.down instanceof Float32Array)) throw new EpError("bad_placement", "expert weights are not the CPU backend's");
  return d as CpuExpertData;
}

export function createCpuExpertCompute(hidden: number, o: { native: boolean }): ExpertCompute {
  const linear = (o.native ? loadNativeKernels()?.linear : undefined) ?? ref.linear;
  let gu = new Float32Array(0);
  let act = new Float32Array(0);
  return {
    hidden,
    run(experts, localExperts, xs, ys, begin, count) {
      const w = cpuData(experts);
      const H = w.hidden;
      const I = w.intermediate;
      if (H !== hidden) throw new EpError("bad_placement", `expert hidden ${H} != ${hidden}`);
      localExperts.forEach((e, le) => {
        const n = count[le]!;
        if (n === 0) return;
        const b = begin[le]!;
        if (gu.length < n * 2 * I) gu = new Float32Array(n * 2 * I);
        if (act.length < n * I) act = new Float32Array(n * I);
        linear(xs.subarray(b * H, (b + n) * H), w.gateUp.subarray(e * 2 * I * H, (e + 1) * 2 * I * H), gu, n, H, 2 * I);
        ref.siluMul(gu, act, n, I);
        linear(act, w.down.subarray(e * H * I, (e + 1) * H * I), ys.subarray(b * H, (b + n) * H), n, I, H);
      });
    },
  };
}
