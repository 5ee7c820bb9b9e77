/**
 * ep-greedy.ts end to end: with two or more GPUs, one golden fixture at EP=2 against EP=1 (exit 0
 * and an ok line); without them, the addon's EP entry points exist and the script refuses with
 * exit 2 and a reason instead of crashing.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { loadCudaAddon, probeCuda } from "../../src/backend/cuda/native";

const SCRIPT = join(import.meta.dir, "ep-greedy.ts");
const probe = probeCuda();
const gpus = probe.ok ? probe.device.count : 0;

function run(args: string[]) {
  const p = Bun.spawnSync([process.execPath, SCRIPT, ...args], { stdout: "pipe", stderr: "pipe", timeout: 170_000 });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

test.skipIf(!probe.ok && probe.reason.includes("not built"))("the addon exports the EP entry points", () => {
  const addon = loadCudaAddon().addon!;
  for (const f of ["setDevice", "epEnable", "epStep", "epRelease"] as const) expect(typeof addon[f]).toBe("function");
});

test.skipIf(gpus >= 2)("without two GPUs the script exits 2 with a reason", () => {
  const r = run(["--archs", "mixtral", "--ds-layers", "0"]);
  expect(r.code).toBe(2);
  expect(r.err).toMatch(/ep-greedy: (no CUDA device|--ranks 2 needs|the CUDA addon)/);
}, 60_000);

test.skipIf(gpus < 2)("mixtral fixture: EP=2 greedy tokens match EP=1", () => {
  const r = run(["--archs", "mixtral", "--ds-layers", "0", "--tokens", "16"]);
  if (r.code !== 0) console.error(r.out, r.err.slice(-3000));
  expect(r.code).toBe(0);
  const line = JSON.parse(r.out.split("\n").find((l) => l.includes('"model":"mixtral"'))!);
  expect(line.ok).toBe(true);
  expect(line.prompts.length).toBe(3);
}, 180_000);
