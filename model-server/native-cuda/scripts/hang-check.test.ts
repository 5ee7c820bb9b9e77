import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// hang-check.sh runs the decode probe several times per environment variant under a time limit per run; here the
// probe is a stub (PROBE_CMD) that prints the probe's JSON fields, or sleeps past the limit under HANG=1, so the
// script's counting, its examination and kill of a hung run and its exit status are checked without a GPU.
const STUB = `#!/usr/bin/env bash
if [ "\${HANG:-}" = "1" ]; then sleep 30; fi
if [ "\${FAIL:-}" = "1" ]; then echo "boom" >&2; exit 3; fi
echo '{"prefillTokS":4242,"idsHash":"'"\${HASH:-abcd1234}"'"}'
`;

function run(args: string[], env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "hang-check-"));
  try {
    const stub = join(dir, "probe.sh");
    writeFileSync(stub, STUB);
    chmodSync(stub, 0o755);
    // the diagnosis stub says whether the hung probe was still alive when it looked
    const diag = join(dir, "diag.sh");
    writeFileSync(diag, `#!/usr/bin/env bash\nkill -0 "$1" && echo "examined live pid $1"\n`);
    chmodSync(diag, 0o755);
    const out = join(dir, "out");
    const started = Date.now();
    const r = spawnSync("bash", [join(import.meta.dir, "hang-check.sh"), ...args], {
      encoding: "utf8",
      env: {
        PATH: process.env.PATH ?? "",
        OUT: out,
        PROBE_CMD: stub,
        HANG_DIAG_CMD: diag,
        HANG_LIMIT_S: "2",
        HANG_RUNS: "2",
        ...env,
      },
      timeout: 60_000,
    });
    const files: Record<string, string> = {};
    if (existsSync(out)) for (const f of readdirSync(out)) files[f] = readFileSync(join(out, f), "utf8");
    const txt = files["hang-check.txt"] ?? "";
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, txt, files, seconds: (Date.now() - started) / 1000 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("counts each variant's runs, kills a run past its limit and fails when any run hung", () => {
  const r = run(["--steps 1", "fine:", "stuck:HANG=1", "other:HASH=ffff0000"]);
  expect(r.status).toBe(1);
  expect(r.stdout).toContain("fine run 1: ok, prefill 4242 tokens/s, ids hash abcd1234");
  expect(r.stdout).toContain("stuck run 2: HUNG (killed after 2 s; where: ");
  // each hung run was examined while it still ran, its output kept beside the diagnosis
  expect(Object.keys(r.files).sort()).toEqual(["hang-check.txt", "hang-stuck-1.txt", "hang-stuck-2.txt"]);
  expect(r.files["hang-stuck-1.txt"]).toMatch(/^examined live pid \d+\n== probe output\n/);
  expect(r.stdout).toContain("== fine (): 2 ok, 0 hung, 0 failed of 2; ids hashes: abcd1234");
  expect(r.stdout).toContain("== stuck (HANG=1): 0 ok, 2 hung, 0 failed of 2; ids hashes: -");
  expect(r.stdout).toContain("== other (HASH=ffff0000): 2 ok, 0 hung, 0 failed of 2; ids hashes: ffff0000");
  expect(r.txt).toBe(r.stdout);
  expect(r.seconds).toBeLessThan(20); // two hung runs of a 30 s sleep, each killed at 2 s
}, 70_000);

test("HANG_STOP=1 ends the check at the first hung run", () => {
  const r = run(["--steps 1", "fine:", "stuck:HANG=1"], { HANG_STOP: "1", HANG_RUNS: "3" });
  expect(r.status).toBe(1);
  expect(r.stdout).toContain("stuck run 1: HUNG");
  expect(r.stdout).not.toContain("run 2");
  expect(r.stdout).toContain("== stuck (HANG=1): 0 ok, 1 hung, 0 failed of 1");
}, 70_000);

test("passes when every run ends well, and reports a failing run apart from a hang", () => {
  expect(run(["--steps 1", "a:", "b:HASH=12345678"]).status).toBe(0);
  const r = run(["--steps 1", "bad:FAIL=1"], { HANG_RUNS: "1" });
  expect(r.status).toBe(1);
  expect(r.stdout).toContain("bad run 1: exit 3");
  expect(r.stdout).toContain("== bad (FAIL=1): 0 ok, 0 hung, 1 failed of 1");
}, 70_000);

test("refuses a malformed variant or count before any run", () => {
  const r = run(["--steps 1", "ok:", "no colon"]);
  expect(r.status).toBe(2);
  expect(r.stdout).toContain("bad variant 'no colon'");
  expect(r.stdout).not.toContain("run 1");
  expect(run(["--steps 1", "a:"], { HANG_RUNS: "0" }).status).toBe(2);
}, 70_000);
