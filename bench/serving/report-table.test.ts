import { expect, test } from "bun:test";
import { dist } from "./metrics";
import { formatMainTable, formatOverheadTable } from "./report-table";

test("main table: one header and one row per run, the asked columns in order", () => {
  const t = formatMainTable([
    { concurrency: 1, target: "gateway", ttftMs: dist([50, 60, 70]), tpotMs: dist([4.5, 4.6]), itlMs: dist([4, 5, 9]), outputTokS: 205.26, rooflineTokS: 701 },
    { concurrency: 64, target: "direct-rpc", ttftMs: dist([1600, 3400]), tpotMs: dist([25.1]), itlMs: dist([25, 29.35]), outputTokS: 2474.5, rooflineTokS: null },
  ]);
  const lines = t.split("\n");
  expect(lines).toHaveLength(3);
  expect(lines[0]).toMatch(/^\s+c target\s+TTFT p50\s+p99\s+TPOT p50\s+p99\s+ITL p99\s+out tok\/s\s+roofline tok\/s$/);
  expect(lines[1]!.trim().split(/\s+/)).toEqual(["1", "gateway", "60.0", "70.0", "4.5", "4.6", "9.0", "205", "701"]);
  expect(lines[2]!.trim().split(/\s+/)).toEqual(["64", "direct-rpc", "1600.0", "3400.0", "25.1", "25.1", "29.4", "2475", "-"]);
  // columns line up: every row as long as the header
  expect(new Set(lines.map((l) => l.length)).size).toBe(1);
});

test("overhead table: runs, medians, added ms and percent, pair ratio range", () => {
  const t = formatOverheadTable([
    { concurrency: 16, promptsPerRun: 16, outputLen: 16, runsPerTarget: 2, gatewayTtftP50Ms: 851.2, directTtftP50Ms: 848.7, gatewayAddedTtftMs: 2.5, gatewayAddedTtftPct: 0.29, pairRatios: [1.001, 1.005], pairRatioMin: 1.001, pairRatioMax: 1.005 },
  ]);
  const [head, row] = t.split("\n");
  expect(head).toMatch(/c\s+runs x prompts\s+gateway ms\s+direct ms\s+added ms\s+added %\s+pair ratio range/);
  expect(row!.trim().split(/\s+/)).toEqual(["16", "2", "x", "16", "851.2", "848.7", "2.50", "0.3", "1.001..1.005"]);
});
