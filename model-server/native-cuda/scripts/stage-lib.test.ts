import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// stage-lib.sh decides on the GPU machine which stages of device-check.sh, moe-ab.sh and
// fused-ab.sh run; a slip there skips a whole device call's work, so its rules are checked here.
const LIB = join(import.meta.dir, "stage-lib.sh");
const USERS = ["device-check.sh", "moe-ab.sh", "fused-ab.sh"];

/** Runs `body` in bash after sourcing stage-lib.sh with BUDGET_S set; returns stdout and stages.log. */
function withLib(budget: number, body: string) {
  const out = mkdtempSync(join(tmpdir(), "stage-lib-"));
  try {
    const r = spawnSync("bash", ["-c", `set -u; OUT=${out}; BUDGET_S=${budget}; source ${LIB}\n${body}`], {
      encoding: "utf8",
      timeout: 10_000,
    });
    let log = "";
    try {
      log = readFileSync(join(out, "stages.log"), "utf8");
    } catch {}
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, log };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

describe("stage-lib.sh", () => {
  test("stage runs while at least half its limit is left, and logs it", () => {
    const r = withLib(100, 'stage "tests" 190 && echo ran');
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("ran");
    expect(r.log).toMatch(/^== tests \(t\+0 s\)\n$/);
  });

  test("stage skips (status 1) when less than half its limit is left", () => {
    const r = withLib(100, 'stage "probe" 202 || echo skipped:$?');
    expect(r.stdout).toContain("skipped:1");
    expect(r.log).toMatch(/^== skipped: probe \((100|99) s left\)\n$/);
  });

  test("the clock counts from sourcing: spent time shrinks what is left", () => {
    const r = withLib(100, 'START=$((START - 70)); echo "left=$(left)"; stage "late" 80 || echo skipped');
    // a second may tick between sourcing and the call
    expect(r.stdout).toMatch(/left=(30|29)\n/);
    expect(r.stdout).toContain("skipped");
    expect(r.log).toMatch(/^== skipped: late \((30|29) s left\)\n$/);
  });

  test("lim caps a limit at what is left, at least 1", () => {
    const r = withLib(100, 'echo "$(lim 30) $(lim 500)"; START=$((START - 400)); echo "$(lim 30)"');
    expect(r.stdout).toMatch(/^30 (100|99)\n1\n$/);
  });

  test("device-check.sh, moe-ab.sh and fused-ab.sh source it and parse", () => {
    for (const name of USERS) {
      const path = join(import.meta.dir, name);
      const text = readFileSync(path, "utf8");
      expect(text).toContain('source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"');
      expect(text).not.toMatch(/^(left|stage|lim)\(\)/m);
      const r = spawnSync("bash", ["-n", path], { encoding: "utf8" });
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
    }
  });
});
