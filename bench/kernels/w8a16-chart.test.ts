// bench/kernels/w8a16_chart.py on the committed session-7 benchmark: the chart docs/kernels.md shows.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const HERE = import.meta.dir;
const SCRIPT = join(HERE, "w8a16_chart.py");
const RESULTS = join(HERE, "results", "h200-2026-11-30-s7-w8a16-bench.json.gz");
const py = Bun.which("python3");

test.skipIf(!py)("the W8A16 chart: share of HBM at T <= 256, speedups at every T, both targets drawn", () => {
  const out = join(mkdtempSync(join(tmpdir(), "w8chart-")), "chart.svg");
  const r = spawnSync(py!, [SCRIPT, RESULTS, out, "test title"], { encoding: "utf8" });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  const svg = readFileSync(out, "utf8");
  expect(svg.startsWith("<svg")).toBe(true);
  expect(svg).toContain("test title");
  // left panel: int8, bf16, torch; right panel: speedup over bf16 and over torch
  expect(svg.match(/<polyline /g)?.length).toBe(5);
  expect(svg).toContain("85% target");
  expect(svg).toContain("1.7x target");
  // the left panel stops at T = 256, the right one runs to the largest T of the run
  const xLabels = [...svg.matchAll(/text-anchor="middle">(\d+)<\/text>/g)].map((m) => Number(m[1]));
  expect(Math.max(...xLabels)).toBe(16384);
  expect(xLabels.filter((t) => t === 256).length).toBe(2);
  expect(xLabels.filter((t) => t === 1024).length).toBe(1);
});

test.skipIf(!py)("a result without int8 rows is refused with a message, no chart written", () => {
  const dir = mkdtempSync(join(tmpdir(), "w8chart-"));
  const empty = join(dir, "empty.json");
  writeFileSync(empty, JSON.stringify({ device: "x", date_utc: "y", hbm_read_ceiling_Bps: 4e12, rows: [] }));
  const r = spawnSync(py!, [SCRIPT, empty, join(dir, "chart.svg")], { encoding: "utf8" });
  expect(r.status).not.toBe(0);
  expect(r.stderr).toContain("no rows with an int8 time");
  expect(existsSync(join(dir, "chart.svg"))).toBe(false);
});
