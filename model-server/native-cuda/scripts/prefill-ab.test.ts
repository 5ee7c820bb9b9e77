import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// prefill-ab.sh runs timeline.sh once per environment variant on the GPU machine and lines up the prefill kernels;
// here it runs in a scratch copy of the tree with a timeline.sh that writes a one-kernel trace (150 us under SLOW=1,
// else 100), so its variant handling, table and archive are checked without a GPU.
const ROOT = join(import.meta.dir, "..", "..", "..");
const py = Bun.which("python3");

const STUB = `#!/usr/bin/env bash
W=$(mktemp -d); d=100000; [ "\${TIMELINE_ENV:-}" = "SLOW=1" ] && d=150000
printf 'start_ns,end_ns,graph_id,graph_node_id,grid,block,cluster,name\\n0,%d,0,0,132x1x1,128x1x1,0x0x0,gemm\\n' $d > $W/kernel-trace.csv
echo '{"prefillTokS":123,"idsHash":"abc"}' > $W/plain.out
cp $W/plain.out $W/probe.out
tar -C $W -czf "$OUT/timeline.tgz" .
`;

function run(args: string[]) {
  const tree = mkdtempSync(join(tmpdir(), "prefill-ab-"));
  try {
    const scripts = join(tree, "model-server", "native-cuda", "scripts");
    mkdirSync(scripts, { recursive: true });
    mkdirSync(join(tree, "bench", "serving"), { recursive: true });
    copyFileSync(join(import.meta.dir, "prefill-ab.sh"), join(scripts, "prefill-ab.sh"));
    copyFileSync(join(ROOT, "bench", "serving", "eager_timeline.py"), join(tree, "bench", "serving", "eager_timeline.py"));
    writeFileSync(join(scripts, "timeline.sh"), STUB);
    chmodSync(join(scripts, "timeline.sh"), 0o755);
    const out = join(tree, "out");
    const r = spawnSync("bash", [join(scripts, "prefill-ab.sh"), ...args], {
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "", OUT: out },
      timeout: 30_000,
    });
    const txt = join(out, "prefill-ab.txt");
    return {
      status: r.status,
      stdout: r.stdout,
      stderr: r.stderr,
      saved: existsSync(txt) ? readFileSync(txt, "utf8") : "",
      archive: existsSync(join(out, "prefill-ab.tgz")),
    };
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

test.skipIf(!py)("two variants: each one's hash line, the kernel side by side, one archive", () => {
  const r = run(["--shape x", "base:", "slow:SLOW=1"]);
  expect(r.status).toBe(0);
  expect(r.stdout).toContain("== base (defaults): timeline exit 0");
  expect(r.stdout).toContain("== slow (SLOW=1): timeline exit 0");
  expect(r.stdout).toContain('"idsHash":"abc"');
  const row = r.stdout.split("\n").find((l) => l.includes("132x1x1"))!;
  expect(row.split(/\s+/).slice(-6)).toEqual(["100.0", "1", "0.10", "150.0", "1", "0.15"]);
  expect(r.saved).toBe(r.stdout);
  expect(r.archive).toBe(true);
});

test("a malformed variant stops it before any run; no variants: the usage", () => {
  const bad = run(["--shape x", "base:", "two words:X=1"]);
  expect(bad.status).toBe(2);
  expect(bad.stdout).toContain("bad variant 'two words:X=1'");
  expect(bad.stdout).not.toContain("== base");
  const none = run(["--shape x"]);
  expect(none.status).toBe(2);
  expect(none.stderr).toContain("Prefill kernels side by side");
});
