// bench/kernels/small_t_table.py on the committed session-8 interleaved benchmark: the table docs/kernels.md shows.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const HERE = import.meta.dir;
const SCRIPT = join(HERE, "small_t_table.py");
const RESULTS = join(HERE, "results", "h200-2026-11-30-s8-interleaved-bench.json.gz");
const py = Bun.which("python3");

test.skipIf(!py)("the decode-size table: one row per shape x projection x T x routing, then the target counts", () => {
  const r = spawnSync(py!, [SCRIPT, RESULTS, "--tokens", "1,8,64"], { encoding: "utf8" });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  const lines = r.stdout.split("\n");
  const body = lines.filter((l) => l.startsWith("| ") && !l.startsWith("| shape"));
  expect(body.length).toBe(5 * 2 * 3 * 2); // models x projections x T x routings
  expect(lines.find((l) => l.startsWith("| shape"))).toContain("bf16 before session 8");
  // every row: time (share) cells and an int8 ratio; the one-token int8 cell is the small-M kernel's
  for (const l of body) expect(l).toMatch(/\| \d+\.\d \(\d+%\) \|.*\| \d+\.\d\dx \|/);
  const counts = lines.filter((l) => l.startsWith("T = "));
  expect(counts.map((l) => l.slice(0, 6))).toEqual(["T = 1:", "T = 8:", "T = 64"]);
  expect(counts[2]).toMatch(/>= 85% of HBM on \d+ of 20 rows \(before session 8: \d+\); int8 >= 1\.7x the bf16 entry on \d+ of 20/);
});

test.skipIf(!py)("a result without the asked token counts is refused with a message", () => {
  const dir = mkdtempSync(join(tmpdir(), "smallt-"));
  const empty = join(dir, "empty.json");
  writeFileSync(empty, JSON.stringify({ device: "x", date_utc: "y", hbm_read_ceiling_Bps: 4e12, rows: [] }));
  const r = spawnSync(py!, [SCRIPT, empty], { encoding: "utf8" });
  expect(r.status).not.toBe(0);
  expect(r.stderr).toContain("no rows with a bf16 time");
});
