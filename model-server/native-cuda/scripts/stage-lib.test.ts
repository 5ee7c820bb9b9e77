import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// stage-lib.sh decides on the GPU machine which stages of device-check.sh, moe-ab.sh and
// fused-ab.sh run and packs what they wrote; a slip there loses a whole device call's work, so its
// rules are checked here.
const LIB = join(import.meta.dir, "stage-lib.sh");
const USERS = ["device-check.sh", "moe-ab.sh", "fused-ab.sh"];
let runs = 0;

/**
 * Runs `body` in bash after `stage_begin NAME 100` (work folder /tmp/NAME, results in a temporary
 * $OUT); `env` adds variables such as BUDGET_S. Returns stdout, stderr, status and stages.log.
 */
function withLib(body: string, env: Record<string, string> = {}) {
  const name = `stage-lib-test-${process.pid}-${runs++}`;
  const results = mkdtempSync(join(tmpdir(), "stage-lib-out-"));
  try {
    const r = spawnSync("bash", ["-c", `set -u; source ${LIB}; stage_begin ${name} 100\n${body}`], {
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "", OUT: results, ...env },
      timeout: 10_000,
    });
    const logPath = `/tmp/${name}/stages.log`;
    const log = existsSync(logPath) ? readFileSync(logPath, "utf8") : "";
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, log, results };
  } finally {
    rmSync(`/tmp/${name}`, { recursive: true, force: true });
    rmSync(results, { recursive: true, force: true });
  }
}

describe("stage-lib.sh", () => {
  test("stage_begin: work folder /tmp/NAME emptied, results to the caller's $OUT, budget default", () => {
    const r = withLib('echo "$OUT|$FINAL_OUT|$BUDGET_S|$(ls -A "$OUT" | wc -l)"');
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(`/tmp/stage-lib-test-${process.pid}-0|${r.results}|100|0\n`);
  });

  test("BUDGET_S from the environment wins over the script's default", () => {
    const r = withLib('echo "$BUDGET_S $(lim 500)"', { BUDGET_S: "40" });
    expect(r.stdout).toMatch(/^40 (40|39)\n$/);
  });

  test("stage runs while at least half its limit is left, and logs it", () => {
    const r = withLib('stage "tests" 190 && echo ran');
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("ran");
    // whole seconds of `date +%s`: the start and the stage may fall either side of a tick
    expect(r.log).toMatch(/^== tests \(t\+[01] s\)\n$/);
  });

  test("stage skips (status 1) when less than half its limit is left", () => {
    const r = withLib('stage "probe" 202 || echo skipped:$?');
    expect(r.stdout).toContain("skipped:1");
    expect(r.log).toMatch(/^== skipped: probe \((100|99) s left\)\n$/);
  });

  test("spent time shrinks what is left", () => {
    const r = withLib('START=$((START - 70)); echo "left=$(left)"; stage "late" 80 || echo skipped');
    // a second may tick between stage_begin and the call
    expect(r.stdout).toMatch(/left=(30|29)\n/);
    expect(r.stdout).toContain("skipped");
    expect(r.log).toMatch(/^== skipped: late \((30|29) s left\)\n$/);
  });

  test("lim caps a limit at what is left, at least 1", () => {
    const r = withLib('echo "$(lim 30) $(lim 500)"; START=$((START - 400)); echo "$(lim 30)"');
    expect(r.stdout).toMatch(/^30 (100|99)\n1\n$/);
  });

  test("stage_pack: $FINAL_OUT/TGZ with stages.log and the logs, without *.f32", () => {
    const r = withLib('echo hi > "$OUT/a.log"; echo x > "$OUT/logits.f32"; stage_pack t.tgz && tar -tzf "$FINAL_OUT/t.tgz" | sort');
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("./\n./a.log\n./stages.log\n");
    expect(r.log).toMatch(/^== done \(t\+[01] s\)\n$/);
  });

  test("device-check.sh, moe-ab.sh and fused-ab.sh source it and parse", () => {
    for (const name of USERS) {
      const path = join(import.meta.dir, name);
      const text = readFileSync(path, "utf8");
      expect(text).toContain('source "$(dirname "${BASH_SOURCE[0]}")/stage-lib.sh"');
      expect(text).toMatch(/^stage_begin [a-z-]+ \d+$/m);
      expect(text).toMatch(/^stage_pack [a-z-]+\.tgz$/m);
      expect(text).not.toMatch(/^(left|stage|lim)\(\)/m);
      const r = spawnSync("bash", ["-n", path], { encoding: "utf8" });
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
    }
  });
});
