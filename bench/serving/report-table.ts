/**
 * The human-readable tables device-serve.ts prints after its JSON lines: the main runs
 * (concurrency, target, TTFT p50/p99, TPOT p50/p99, ITL p99, output tok/s, roofline tok/s) and
 * the gateway's TTFT overhead per concurrency. Pure.
 *
 * @example
 *   console.log(formatMainTable([{ concurrency: 1, target: "gateway", ttftMs, tpotMs, itlMs, outputTokS: 205, rooflineTokS: 701 }]));
 */
import type { Dist } from "./metrics";
import type { OverheadSummary } from "./run-plan";

export interface MainRow {
  concurrency: number;
  target: string;
  ttftMs: Dist;
  tpotMs: Dist;
  itlMs: Dist;
  outputTokS: number;
  rooflineTokS: number | null;
}

export interface OverheadRow extends OverheadSummary {
  concurrency: number;
  promptsPerRun: number;
  outputLen: number;
}

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");
const cells = (xs: (string | number)[], widths: number[]) => xs.map((x, i) => (i === 1 ? String(x).padEnd(widths[i]!) : String(x).padStart(widths[i]!))).join(" ");

export function formatMainTable(rows: MainRow[]): string {
  const w = [4, 10, 9, 8, 9, 8, 8, 10, 14];
  return [
    cells(["c", "target", "TTFT p50", "p99", "TPOT p50", "p99", "ITL p99", "out tok/s", "roofline tok/s"], w),
    ...rows.map((r) =>
      cells([r.concurrency, r.target, ms(r.ttftMs.p50), ms(r.ttftMs.p99), ms(r.tpotMs.p50), ms(r.tpotMs.p99), ms(r.itlMs.p99), r.outputTokS.toFixed(0), r.rooflineTokS ?? "-"], w),
    ),
  ].join("\n");
}

export function formatOverheadTable(rows: OverheadRow[]): string {
  const w = [4, 14, 10, 10, 9, 8, 17];
  return [
    cells(["c", "runs x prompts", "gateway ms", "direct ms", "added ms", "added %", "pair ratio range"], w),
    ...rows.map((r) =>
      cells([r.concurrency, `${r.runsPerTarget} x ${r.promptsPerRun}`, ms(r.gatewayTtftP50Ms), ms(r.directTtftP50Ms), r.gatewayAddedTtftMs.toFixed(2), r.gatewayAddedTtftPct.toFixed(1), `${r.pairRatioMin.toFixed(3)}..${r.pairRatioMax.toFixed(3)}`], w),
    ),
  ].join("\n");
}
