/**
 * The targets, checked on the results:
 * - dispatch's hit rate >= 0.95 x the oracle's, at every workload and load;
 * - dispatch's p99 TTFT <= 1.1 x the oracle's, at every workload and load;
 * - dispatch's p99 TTFT strictly below every baseline's at 80% and 95% load
 *   on the shared-prefix and multi-turn workloads.
 */
import type { CellResult } from "./matrix";

export interface TargetCheck {
  target: string;
  workload: string;
  load: number;
  pass: boolean;
  detail: string;
}

const STRICT_WORKLOADS = ["shared-prefix", "multi-turn"];
const STRICT_LOADS = [0.8, 0.95];

export function checkTargets(cells: CellResult[], baselines: string[]): TargetCheck[] {
  const out: TargetCheck[] = [];
  const keys = [...new Set(cells.map((c) => `${c.workload}|${c.load}`))];
  for (const key of keys) {
    const [workload, loadStr] = key.split("|") as [string, string];
    const load = Number(loadStr);
    const at = (p: string) => cells.find((c) => c.workload === workload && c.load === load && c.policy === p);
    const d = at("dispatch");
    const o = at("oracle");
    if (!d || !o) continue;
    const hitRatio = d.hitRate / o.hitRate;
    out.push({ target: "hit >= 0.95 x oracle", workload, load, pass: hitRatio >= 0.95, detail: `${d.hitRate.toFixed(3)} vs ${o.hitRate.toFixed(3)} (x${hitRatio.toFixed(3)})` });
    const p99Ratio = d.ttftP99Ms / o.ttftP99Ms;
    out.push({ target: "p99 <= 1.1 x oracle", workload, load, pass: p99Ratio <= 1.1, detail: `${d.ttftP99Ms.toFixed(0)} vs ${o.ttftP99Ms.toFixed(0)} ms (x${p99Ratio.toFixed(3)})` });
    if (STRICT_WORKLOADS.includes(workload) && STRICT_LOADS.includes(load)) {
      const rivals = baselines.map(at).filter((c): c is CellResult => c !== undefined);
      const best = rivals.reduce((a, b) => (b.ttftP99Ms < a.ttftP99Ms ? b : a));
      out.push({
        target: "p99 < every baseline",
        workload,
        load,
        pass: d.ttftP99Ms < best.ttftP99Ms,
        detail: `${d.ttftP99Ms.toFixed(0)} ms vs best baseline ${best.policy} ${best.ttftP99Ms.toFixed(0)} ms`,
      });
    }
  }
  return out;
}
