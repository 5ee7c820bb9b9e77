/**
 * `npm run bench:routing`: every routing policy, through the real gateway
 * routing code, against simulated servers; then gateway replicas sharing
 * state through a real Redis. Writes bench/routing/results/routing.json and
 * routing.md, docs/routing-chart.svg, and the results block of docs/routing.md.
 *
 * Flags:
 *   --trace <path>          Mooncake conversation_trace.jsonl (default: the shared copy)
 *   --trace-requests <n>    first n trace requests (default 2000)
 *   --skip-trace            leave the trace workload out
 *   --seeds <n>             seeds per generated workload (default 3)
 *   --skip-replicas         leave the Redis replica experiment out
 *   --no-write              print only
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { testRedis } from "@dispatch/common/src/testing/redis";
import { renderChart, type ChartPanel } from "./chart";
import { LOADS, runWorkload, type CellResult, type WorkloadInfo } from "./matrix";
import { BENCH_POLICIES } from "./policies";
import { runReplicaExperiment, type ReplicaResult } from "./replicas";
import { renderMarkdown } from "./report";
import { checkTargets } from "./targets";
import { DEFAULT_TRACE, traceWorkload } from "./trace";
import { multiTurnWorkload, sharedPrefixWorkload, zipfWorkload } from "./workloads";
import type { Workload } from "./workload";

const root = join(dirname(new URL(import.meta.url).pathname), "..", "..");

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return undefined;
  const v = process.argv[i + 1];
  if (v === undefined || v.startsWith("--")) throw new Error(`--${name} needs a value`);
  return v;
}
const has = (name: string) => process.argv.includes(`--${name}`);

async function main(): Promise<void> {
  const started = performance.now();
  const seeds = Number(flag("seeds") ?? 3);
  const tracePath = flag("trace") ?? DEFAULT_TRACE;
  const traceRequests = Number(flag("trace-requests") ?? 2000);
  if (!(seeds >= 1) || !(traceRequests >= 1)) throw new Error("--seeds and --trace-requests must be >= 1");
  const log = (l: string) => console.log(l);
  const blockSize = 64;

  const generated: Array<(seed: number) => Workload> = [
    (s) => sharedPrefixWorkload(blockSize, s),
    (s) => multiTurnWorkload(blockSize, s),
    (s) => multiTurnWorkload(blockSize, s, 256, 6, false),
    (s) => zipfWorkload(blockSize, s),
  ];
  const infos: WorkloadInfo[] = [];
  const cells: CellResult[] = [];
  for (const make of generated) {
    const variants = Array.from({ length: seeds }, (_, i) => ({ seed: i + 1, workload: make(i + 1) }));
    const r = await runWorkload(variants, BENCH_POLICIES, LOADS, log);
    infos.push(r.info);
    cells.push(...r.cells);
  }
  if (!has("skip-trace")) {
    const r = await runWorkload([{ seed: 1, workload: traceWorkload(tracePath, blockSize, traceRequests) }], BENCH_POLICIES, LOADS, log);
    infos.push(r.info);
    cells.push(...r.cells);
  }

  const targets = checkTargets(cells, BENCH_POLICIES.filter((p) => p.baseline).map((p) => p.label));
  for (const t of targets) log(`${t.pass ? "met   " : "MISSED"} ${t.target.padEnd(22)} ${t.workload.padEnd(15)} ${Math.round(t.load * 100)}%  ${t.detail}`);

  let replicas: ReplicaResult[] | string = "Not run (--skip-replicas).";
  if (!has("skip-replicas")) {
    if (!Bun.which("redis-server")) {
      replicas = "Not run: redis-server is not installed (apt-get install redis-server).";
      log(replicas);
    } else {
      const redis = await testRedis();
      replicas = await runReplicaExperiment(redis.url, [sharedPrefixWorkload(blockSize, 1), multiTurnWorkload(blockSize, 1)], 0.8, 1, log);
      redis.proc.kill();
    }
  }

  const durationS = (performance.now() - started) / 1000;
  const meta = {
    command: `npm run bench:routing${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`,
    date: new Date().toISOString().slice(0, 10),
    machine: `${cpus().length} x ${cpus()[0]?.model.trim() ?? "unknown CPU"}, Bun ${Bun.version}`,
    seeds,
    traceRequests,
    durationS,
  };
  const markdown = renderMarkdown(meta, infos, cells, targets, replicas);
  const panels: ChartPanel[] = infos.filter((w) => w.name !== "multi-turn-nokey").map((w) => ({
    workload: w.name,
    series: BENCH_POLICIES.filter((p) => p.label !== "dispatch@previous").map((p) => ({
      policy: p.label,
      points: cells.filter((c) => c.workload === w.name && c.policy === p.label).map((c) => [c.load, c.ttftP99Ms, c.hitRate] as [number, number, number]),
    })),
  }));
  const svg = renderChart(panels, `Routing policies, 8 simulated servers (${meta.command}, ${meta.date})`);
  log(`done in ${durationS.toFixed(1)} s`);
  if (has("no-write")) return;

  const resultsDir = join(root, "bench", "routing", "results");
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, "routing.json"), `${JSON.stringify({ meta, workloads: infos, cells, targets, replicas }, null, 2)}\n`);
  writeFileSync(join(resultsDir, "routing.md"), `${markdown}\n`);
  writeFileSync(join(root, "docs", "routing-chart.svg"), `${svg}\n`);
  const doc = join(root, "docs", "routing.md");
  const begin = "<!-- bench:routing:begin -->";
  const end = "<!-- bench:routing:end -->";
  if (existsSync(doc)) {
    const text = readFileSync(doc, "utf8");
    const a = text.indexOf(begin);
    const b = text.indexOf(end);
    if (a >= 0 && b > a) writeFileSync(doc, `${text.slice(0, a + begin.length)}\n${markdown}\n${text.slice(b)}`);
  }
  log(`wrote ${join(resultsDir, "routing.json")}, routing.md, docs/routing-chart.svg`);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
