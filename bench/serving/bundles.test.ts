/**
 * The Bun bundles the GPU machine runs (make-bundles.sh, built from HEAD), outside the
 * repository: copied to a folder with no node_modules above it, device-serve.js starts the
 * bundled model server (CPU backend, the bundled model) and the bundled gateway and runs
 * serve-bench through both. Before make-bundles.sh rewrote tiktoken's __dirname, the server died
 * there with "Missing tiktoken_bg.wasm" (it looked only under the build machine's node_modules).
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ROOT } from "../gateway/processes";

const tmp = mkdtempSync(join(tmpdir(), "dispatch-bundles-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** True when some folder above `dir` holds node_modules (then the test would prove nothing). */
function nodeModulesAbove(dir: string): boolean {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, "node_modules"))) return true;
    if (dirname(d) === d) return false;
  }
}

test("bundled model server and gateway serve from a folder without node_modules", async () => {
  expect(nodeModulesAbove(tmp)).toBe(false);
  const bundle = join(tmp, "bundle");
  const build = Bun.spawnSync(["bash", join(ROOT, "bench", "serving", "make-bundles.sh")], { env: { ...process.env, BUNDLE_OUT: bundle, BUN: process.execPath }, stdout: "pipe", stderr: "pipe" });
  expect(build.stderr.toString()).not.toContain("make-bundles:");
  expect(build.exitCode).toBe(0);
  for (const f of ["model-server.js", "gateway.js"]) {
    const src = readFileSync(join(bundle, f), "utf8");
    expect(src).not.toContain('node_modules/tiktoken";');
    expect(src).toMatch(/var __dirname\w* = import\.meta\.dir;/);
  }
  const out = join(tmp, "out");
  const run = Bun.spawn(
    [process.execPath, join(bundle, "device-serve.js"), "--backend", "cpu", "--model", join(ROOT, "model-server", "models", "tiny-wordnet-moe"), "--vocab", "4000", "--bundle", bundle, "--concurrency", "1,2", "--input-len", "24", "--output-len", "6", "--out", out],
    { cwd: tmp, stdout: "pipe", stderr: "pipe" },
  );
  const killer = setTimeout(() => run.kill("SIGKILL"), 100_000);
  const [stdout, stderr, code] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text(), run.exited]);
  clearTimeout(killer);
  const serverLog = existsSync(join(out, "model-server.log")) ? readFileSync(join(out, "model-server.log"), "utf8") : "";
  expect(serverLog).not.toContain("Missing tiktoken_bg.wasm");
  expect(code, `${stderr}\n${serverLog}`).toBe(0);
  expect(serverLog).toMatch(/KV cache: 8192 blocks of 16 tokens \(0.50 GiB\), from 512 MB/);
  const all = stdout.trim().split("\n");
  const lines = all.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(lines[0]).toEqual({ kind: "roofline", model: "tiny-wordnet-moe", skipped: "backend cpu" });
  // main rows carry no phase field (chart.ts reads them so)
  const runs = lines.filter((l) => typeof l.target === "string").map((l): Record<string, unknown> => ({ ...l, phase: l.phase ?? "main" }));
  // per concurrency: the warm-up, main gateway then direct, then G D D G blocks
  for (const c of [1, 2]) {
    const mine = runs.filter((r) => r.concurrency === c);
    const order = mine.map((r) => `${r.phase}/${r.target}`);
    expect(order.slice(0, 3)).toEqual(["warmup/gateway", "main/gateway", "main/direct-rpc"]);
    const overhead = mine.slice(3).map((r) => r.target);
    expect(mine.slice(3).every((r) => r.phase === "overhead")).toBe(true);
    expect(overhead.length % 4).toBe(0);
    expect(overhead.length).toBeGreaterThanOrEqual(4);
    for (let i = 0; i < overhead.length; i += 4) expect(overhead.slice(i, i + 4)).toEqual(["gateway", "direct-rpc", "direct-rpc", "gateway"]);
    const summary = lines.find((l) => l.kind === "gateway-overhead" && l.concurrency === c)!;
    expect(summary).toMatchObject({ runsPerTarget: overhead.length / 2, promptsPerRun: 4, outputLen: 6 });
    expect(typeof summary.gatewayAddedTtftMs).toBe("number");
    expect((summary.pairRatios as number[]).length).toBe(overhead.length / 2);
  }
  // every run sent prompts no earlier run sent: nothing came from the model server's prefix cache
  // (24-token prompts: one whole 16-token block each could have been reused)
  expect(new Set(runs.map((r) => r.seed)).size).toBe(runs.length);
  for (const r of runs) expect(r.cachedPromptTokens).toBe(0);
  const rows = runs.filter((r) => r.phase === "main");
  for (const r of rows) {
    expect(r).toMatchObject({ completed: 4, failed: 0, shortOutputs: 0, outputTokens: 24, inputLen: 24, outputLen: 6, rooflineTokS: null, serverPromptTokens: 96 });
    expect((r.ttftMs as { p99: number }).p99).toBeGreaterThan(0);
    expect((r.itlMs as { p50: number }).p50).toBeGreaterThan(0);
  }
  // the plain-text tables come last
  const text = all.filter((l) => !l.startsWith("{")).join("\n");
  expect(text).toMatch(/c target\s+TTFT p50\s+p99\s+TPOT p50\s+p99\s+ITL p99\s+out tok\/s\s+roofline tok\/s/);
  expect(text.match(/^\s+[12] (gateway|direct-rpc)\s/gm)).toHaveLength(4);
  expect(text).toMatch(/gateway TTFT overhead/);
  expect(text.match(/^\s+[12] \d+ x 4\s/gm)).toHaveLength(2);
  expect(all.at(-1)!.startsWith("{")).toBe(false);
}, 120_000);

test("--targets gateway: warm-up and main runs through the gateway only, no overhead blocks", async () => {
  const bundle = join(tmp, "bundle");
  expect(existsSync(join(bundle, "device-serve.js")), "the first test builds the bundles").toBe(true);
  const out = join(tmp, "out-gateway-only");
  const run = Bun.spawn(
    [process.execPath, join(bundle, "device-serve.js"), "--backend", "cpu", "--model", join(ROOT, "model-server", "models", "tiny-wordnet-moe"), "--vocab", "4000", "--bundle", bundle, "--concurrency", "1", "--input-len", "24", "--output-len", "4", "--targets", "gateway", "--out", out],
    { cwd: tmp, stdout: "pipe", stderr: "pipe" },
  );
  const killer = setTimeout(() => run.kill("SIGKILL"), 60_000);
  const [stdout, stderr, code] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text(), run.exited]);
  clearTimeout(killer);
  expect(code, stderr).toBe(0);
  const lines = stdout.trim().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
  const runs = lines.filter((l) => typeof l.target === "string").map((l) => `${l.phase ?? "main"}/${l.target}`);
  expect(runs).toEqual(["warmup/gateway", "main/gateway"]);
  expect(lines.find((l) => l.kind === "gateway-overhead")).toEqual({ kind: "gateway-overhead", concurrency: 1, skipped: "--targets gateway" });
  const main = lines.find((l) => l.target === "gateway" && l.phase === undefined)!;
  expect(main).toMatchObject({ completed: 4, failed: 0, int8Experts: false, zipf: 0 });
}, 90_000);

test("the bundled soak: mixed traffic through the gateway, then a drained, ready server and the same greedy probe", async () => {
  const bundle = join(tmp, "bundle");
  expect(existsSync(join(bundle, "device-soak.js")), "the first test builds the bundles").toBe(true);
  const out = join(tmp, "out-soak");
  // at most 4 sequences at a time, so requests wait for admission and some are cancelled while they wait; 16 KV blocks
  // of 16 tokens where 4 sequences of up to 160 + 64 tokens want 56, so running sequences are preempted and recomputed;
  // the API's newer features in the mix (n, batches of prompts, JSON mode, logit_bias, priority, echo)
  const run = Bun.spawn(
    [process.execPath, join(bundle, "device-soak.js"), "--backend", "cpu", "--model", join(ROOT, "model-server", "models", "tiny-wordnet-moe"), "--vocab", "4000", "--bundle", bundle, "--duration", "8", "--rate", "8", "--max-prompt", "160", "--max-output", "64", "--max-num-seqs", "4", "--server-args=--kv-blocks 16", "--features", "--request-timeout-s", "60", "--out", out],
    { cwd: tmp, stdout: "pipe", stderr: "pipe" },
  );
  const killer = setTimeout(() => run.kill("SIGKILL"), 90_000);
  const [stdout, stderr, code] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text(), run.exited]);
  clearTimeout(killer);
  expect(code, stderr).toBe(0);
  const r = JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, any>;
  expect(r).toMatchObject({ kind: "soak", ok: true, failureCount: 0, drained: { running: 0, waiting: 0, kvBlocksUsed: 0, ready: true, serverExited: false } });
  expect(r.sent).toBeGreaterThanOrEqual(30);
  expect(r.preemptions, "the KV cache was too small for the batch").toBeGreaterThan(0);
  const counts = r.counts as Record<string, { sent: number; completed: number; cancelled: number; refused: number; failed: number }>;
  expect(counts.stream!.completed).toBeGreaterThan(0);
  expect(counts.invalid!.refused).toBe(counts.invalid!.sent);
  expect(r.probe.before.length).toBeGreaterThan(0);
  expect(r.probe.after).toBe(r.probe.before);
  expect(r.ttftMs.p50).toBeGreaterThan(0);
  expect(r.ttftMs.p99).toBeLessThanOrEqual(r.e2eMs.max);
  expect(r.peaks.running).toBeGreaterThan(0);
  expect(r.peaks.running).toBeLessThanOrEqual(4);
  expect(JSON.parse(readFileSync(join(out, "soak.json"), "utf8")).sent).toBe(r.sent);
}, 120_000);

test("--targets refuses anything but gateway or gateway,direct", () => {
  const r = Bun.spawnSync([process.execPath, join(ROOT, "bench", "serving", "device-serve.ts"), "--backend", "cpu", "--targets", "direct"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode).not.toBe(0);
  expect(r.stderr.toString()).toContain("--targets must be gateway or gateway,direct");
});
