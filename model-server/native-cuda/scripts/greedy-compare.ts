/**
 * Greedy decoding and near-tie comparison shared by the multi-GPU checks (ep-greedy.ts,
 * ep-dp-greedy.ts): every prompt decoded together, the top-1 and top-2 gap kept at each position,
 * and a comparison that lets two runs part only where the reference's top-2 gap is below `tie`.
 *
 * @example
 *   const ref = await greedyDecode(step1, prompts, 32, (i) => tables[i]);
 *   const cmp = compareGreedy(ref.tops, ep.tops, 0.05);   // cmp.ok, cmp.rows
 *   const { addon, N } = requireGpus("ep-greedy", values.ranks);  // exits 2 without enough GPUs
 */
import { probeCuda, type CudaAddon, type DeviceInfo } from "../../src/backend/cuda/native";
import type { StepInput } from "../../src/model/runner";
import { type Top2, top2 } from "../../src/model/testing/top2";

/** Steps a model (or a group of ranks) and returns logits per sequence. */
export type Stepper = (step: StepInput) => Promise<Float32Array[]>;

/** Greedy decode of every prompt together: per prompt the top-1 and top-2 gap at each of n positions. */
export async function greedyDecode(step: Stepper, prompts: Int32Array[], n: number, tableOf: (i: number) => Int32Array): Promise<{ tops: Top2[][]; first: Float32Array[] }> {
  const tables = prompts.map((_, i) => tableOf(i));
  const first = await step({ seqs: prompts.map((p, i) => ({ tokens: p, startPos: 0, blockTable: tables[i]!, numLogits: 1 })) });
  let next = first.map(top2);
  const tops = prompts.map(() => [] as Top2[]);
  for (let s = 0; s < n; s++) {
    next.forEach((t, i) => tops[i]!.push(t));
    if (s === n - 1) break;
    const out = await step({ seqs: prompts.map((p, i) => ({ tokens: Int32Array.of(tops[i]!.at(-1)!.best), startPos: p.length + s, blockTable: tables[i]!, numLogits: 1 })) });
    next = out.map(top2);
  }
  return { tops, first };
}

/** Per prompt: positions that agree before the first difference, and whether that difference was a near tie of the reference. */
export function compareGreedy(ref: Top2[][], other: Top2[][], tie: number) {
  let ok = true;
  const rows = ref.map((r, i) => {
    let k = 0;
    while (k < r.length && r[k]!.best === other[i]![k]!.best) k++;
    if (k === r.length) return { agree: k };
    const nearTie = r[k]!.gap < tie;
    if (!nearTie) ok = false;
    return { agree: k, ep1Gap: +r[k]!.gap.toFixed(4), ep1Token: r[k]!.best, epToken: other[i]![k]!.best, nearTie };
  });
  return { ok, rows };
}

export function maxAbsDiff(a: Float32Array[], b: Float32Array[]): number {
  let m = 0;
  a.forEach((x, i) => x.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[i]![j]!)))));
  return m;
}

/** The CUDA addon and device for a check over `ranks` GPUs; prints why and exits 2 when there are too few. */
export function requireGpus(script: string, ranks: string | undefined): { addon: CudaAddon; device: DeviceInfo; N: number } {
  const probe = probeCuda();
  if (!probe.ok) {
    console.error(`${script}: ${probe.reason}`);
    process.exit(2);
  }
  const N = Number(ranks);
  if (!(Number.isInteger(N) && N >= 2 && N <= probe.device.count)) {
    console.error(`${script}: --ranks ${ranks} needs 2..${probe.device.count} GPUs`);
    process.exit(2);
  }
  return { addon: probe.addon, device: probe.device, N };
}
