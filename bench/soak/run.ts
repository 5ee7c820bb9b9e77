/**
 * The soak: N CPU model servers and a gateway as real processes on loopback;
 * measure capacity through the gateway, then hold half of it (open loop) for
 * `--duration` seconds while sampling RSS and open fds of every process;
 * report least-squares slopes, errors and latency, and write a JSON result.
 *
 *   bun bench/soak/run.ts                      # the ~10-minute soak (600 s)
 *   bun bench/soak/run.ts --duration 45        # the short variant
 *   bun bench/soak/run.ts --duration 45 --servers 2 --max-tokens 32 --every 2
 *   bun bench/soak/run.ts --server-args="--kv-blocks 1024"   # a KV pool that fills in seconds
 *
 * The model servers' KV gauges (blocks used + cached) are sampled beside RSS:
 * the KV pool is allocated up front but its pages become resident only when
 * a block is first written, so RSS climbs until every block has been used
 * once (512 MiB with the default --kv-memory-mb), then flattens.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startCluster } from "../../test/support/cluster";
import { tally } from "../../test/support/load";
import { scrapeMetrics } from "../../test/support/metrics";
import { measureCapacity } from "./capacity";
import { openLoop } from "./open-loop";
import { createSampler } from "./sampler";

const { values: a } = parseArgs({
  options: {
    duration: { type: "string", default: "600" },
    servers: { type: "string", default: "2" },
    "max-tokens": { type: "string", default: "32" },
    every: { type: "string", default: "" },
    "capacity-step": { type: "string", default: "4" },
    fraction: { type: "string", default: "0.5" },
    "server-args": { type: "string", default: "" },
    out: { type: "string", default: join(import.meta.dir, "results") },
  },
});
const durationS = Number(a.duration);
const everyS = a.every ? Number(a.every) : Math.max(1, Math.min(10, durationS / 30));
const maxTokens = Number(a["max-tokens"]);
const load1 = () => loadavg().map((x) => Math.round(x * 100) / 100);

const started = new Date();
const loadStart = load1();
const serverArgs = a["server-args"] ? a["server-args"].split(/\s+/).filter(Boolean) : [];
const c = await startCluster({ servers: Number(a.servers), serverArgs });
try {
  const body = (n: number) => ({
    model: c.model,
    messages: [{ role: "system", content: "You are a helpful assistant." }, { role: "user", content: `soak ${n}: say something about word ${n % 211}` }],
    max_tokens: maxTokens,
    temperature: 0.7,
    seed: n,
    stream: true,
  });
  const cap = await measureCapacity({ baseUrl: c.gateway.url, body, stepMs: Number(a["capacity-step"]) * 1000 });
  const rate = cap.rps * Number(a.fraction);
  console.error(`[soak] capacity ${cap.rps.toFixed(2)} req/s (${JSON.stringify(cap.steps)}); holding ${rate.toFixed(2)} req/s for ${durationS} s`);
  const pids = () => ({ gateway: c.gateway.process.pid, ...Object.fromEntries(c.servers.map((s, i) => [`model-server-${i}`, s.process.pid])), driver: process.pid });
  const t0 = performance.now();
  const sampler = createSampler(pids, everyS * 1000);
  sampler.start();
  // KV blocks holding data (used by sequences or kept by the prefix cache), per server, beside the RSS samples.
  const kv: Array<{ t: number; server: number; blocks: number; total: number }> = [];
  const kvTimer = setInterval(() => {
    const t = Math.round((performance.now() - t0) / 100) / 10;
    c.servers.forEach((s, i) =>
      void scrapeMetrics(s.url)
        .then((m) => kv.push({ t, server: i, blocks: (m.get("dispatch_ms_kv_blocks_used") ?? 0) + (m.get("dispatch_ms_kv_blocks_cached") ?? 0), total: m.get("dispatch_ms_kv_blocks_total") ?? 0 }))
        .catch(() => {}),
    );
  }, everyS * 1000);
  const r = await openLoop({ baseUrl: c.gateway.url, rate, durationMs: durationS * 1000, maxInFlight: 256, body });
  const heldS = (performance.now() - t0) / 1000;
  sampler.stop();
  clearInterval(kvTimer);
  const t = tally(r.outcomes);
  const lat = r.outcomes.filter((x) => x.kind === "ok").map((x) => x.ms).sort((x, y) => x - y);
  const pct = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? null;
  const result = {
    started: started.toISOString(),
    machine: { cpu: cpus()[0]?.model ?? "unknown", cores: cpus().length },
    loadAverage: { start: loadStart, end: load1() },
    command: `bun bench/soak/run.ts ${process.argv.slice(2).join(" ")}`.trim(),
    servers: c.servers.length,
    serverArgs,
    maxTokens,
    capacity: cap,
    offeredRps: Math.round(rate * 100) / 100,
    heldSeconds: Math.round(heldS),
    sent: r.sent,
    shed: r.shed,
    completedRps: Math.round((lat.length / heldS) * 100) / 100,
    outcomes: t,
    errors: t.total - (t.byKind.ok ?? 0) + r.shed,
    latencyMs: { p50: pct(0.5), p90: pct(0.9), p99: pct(0.99), max: lat.at(-1) ?? null },
    warmupSeconds: Math.min(60, durationS / 5),
    processes: sampler.summary(Math.min(60, durationS / 5)),
    kvBlocksEnd: c.servers.map((_, i) => kv.filter((k) => k.server === i).at(-1) ?? null),
    kv,
    samples: sampler.samples,
  };
  mkdirSync(a.out!, { recursive: true });
  const file = join(a.out!, `${started.toISOString().replace(/[:.]/g, "-")}-${durationS}s.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 1)}\n`);
  const { samples: _omit, kv: _kv, ...brief } = result;
  console.log(JSON.stringify(brief, null, 1));
  console.error(`[soak] wrote ${file}`);
  process.exitCode = result.errors === 0 ? 0 : 1;
} finally {
  await c.stop();
}
