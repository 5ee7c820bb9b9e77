/** Summaries of one simulation run. */
import type { SimResult } from "./simulate";

export interface RunSummary {
  hitRate: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  ttftMeanMs: number;
  /** Coefficient of variation of per-server work (prefill + per-sequence decode time). */
  imbalanceCv: number;
  makespanS: number;
  utilization: number;
  reasons: Record<string, number>;
}

export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[rank]!;
}

export function coefficientOfVariation(xs: readonly number[]): number {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  if (mean === 0) return 0;
  const variance = xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length;
  return Math.sqrt(variance) / mean;
}

export function summarize(r: SimResult): RunSummary {
  const busy = r.busyMs.reduce((a, b) => a + b, 0);
  return {
    hitRate: r.promptTokens > 0 ? r.hitTokens / r.promptTokens : 0,
    ttftP50Ms: percentile(r.ttftMs, 50),
    ttftP99Ms: percentile(r.ttftMs, 99),
    ttftMeanMs: r.ttftMs.reduce((a, b) => a + b, 0) / r.ttftMs.length,
    imbalanceCv: coefficientOfVariation(r.workMs),
    makespanS: r.makespanMs / 1000,
    utilization: r.makespanMs > 0 ? busy / (r.makespanMs * r.busyMs.length) : 0,
    reasons: r.reasons,
  };
}
