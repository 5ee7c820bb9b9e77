/**
 * Gateway benchmark: added latency and maximum throughput of dispatch's
 * gateway against a direct connection and against the Portkey gateway, in
 * one run, same upstream, same load generator (wrk).
 *
 *   npm run bench:gateway [-- --seconds 4 --connections 50 --rounds 3]
 *
 * Every measurement is taken in `rounds` interleaved rounds (direct,
 * dispatch, Portkey, direct, ...) and reported as the median, so a burst of
 * load from elsewhere on the shared machine hits all paths alike; added
 * latency is the median of per-round differences against direct.
 *
 * Writes bench/gateway/results/<timestamp>.json and docs/gateway-bench.md.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { ensureWrk, type Target, wrk, type WrkResult } from "./load";
import { freePort, type Proc, ROOT, start, stopAll, waitReady } from "./processes";
import { renderMarkdown } from "./report";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}
const seconds = arg("seconds", 4);
const connections = arg("connections", 50);
const rounds = arg("rounds", 3);

interface ModeResult {
  max: Record<string, WrkResult>;
  rate: number;
  at_half: Record<string, WrkResult>;
  added: Record<string, { p50_ms: number; p99_ms: number }>;
  rounds: { max: Record<string, WrkResult[]>; at_half: Record<string, WrkResult[]> };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The run whose `key` is the median (an actual run, so its fields agree with each other). */
function medianBy<T>(xs: T[], key: (x: T) => number): T {
  const s = [...xs].sort((a, b) => key(a) - key(b));
  return s[(s.length - 1) >> 1]!;
}

const BODIES = {
  stream: JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say hello." }], stream: true }),
  nonstream: JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say hello." }] }),
};
type Mode = keyof typeof BODIES;

/** One request per target and mode: 64 content chunks and [DONE], or the full message. */
async function check(t: Target, mode: Mode): Promise<void> {
  const res = await fetch(t.url, { method: "POST", headers: { "content-type": "application/json", ...t.headers }, body: BODIES[mode] });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${t.name} ${mode}: HTTP ${res.status}: ${text.slice(0, 300)}`);
  if (mode === "stream") {
    const chunks = text.split("\n\n").filter((f) => f.startsWith("data: {") && f.includes('"content":" tok'));
    if (chunks.length !== 64 || !text.endsWith("data: [DONE]\n\n")) throw new Error(`${t.name} stream: ${chunks.length} content chunks`);
  } else if (!text.includes(" tok63")) throw new Error(`${t.name} nonstream: unexpected body ${text.slice(0, 200)}`);
}

async function main(): Promise<void> {
  ensureWrk();
  const [up, gw, pk, mp] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const upstreamUrl = `http://127.0.0.1:${up}/v1`;
  const procs: Proc[] = [];
  try {
    procs.push(start("upstream", ["bench/gateway/upstream.ts", "--port", String(up)], up));
    await waitReady(procs[0]!, () => fetch(`${upstreamUrl}/models`));
    procs.push(start("dispatch", ["gateway/src/main.ts", "--port", String(gw)], gw, { DISPATCH_BACKENDS: `openai=${upstreamUrl}` }));
    await waitReady(procs[1]!, () => fetch(`http://127.0.0.1:${gw}/readyz`));
    procs.push(start("portkey", ["node_modules/@portkey-ai/gateway/build/start-server.js", `--port=${pk}`, "--headless"], pk));
    await waitReady(procs[2]!, () => fetch(`http://127.0.0.1:${pk}/`));
    procs.push(start("minimal-proxy", ["bench/gateway/minimal-proxy.ts", "--port", String(mp), "--upstream", upstreamUrl], mp));
    await waitReady(procs[3]!, () => fetch(`http://127.0.0.1:${mp}/v1/models`));

    const targets: Target[] = [
      { name: "direct", url: `${upstreamUrl}/chat/completions`, headers: {} },
      { name: "dispatch", url: `http://127.0.0.1:${gw}/v1/chat/completions`, headers: {} },
      { name: "minimal-proxy", url: `http://127.0.0.1:${mp}/v1/chat/completions`, headers: {} },
      {
        name: "portkey",
        url: `http://127.0.0.1:${pk}/v1/chat/completions`,
        headers: { "x-portkey-provider": "openai", "x-portkey-custom-host": upstreamUrl, authorization: "Bearer sk-bench" },
      },
    ];
    for (const t of targets) for (const m of Object.keys(BODIES) as Mode[]) await check(t, m);

    const load_before = loadavg();
    const results: Record<Mode, ModeResult> = {} as never;
    for (const mode of Object.keys(BODIES) as Mode[]) {
      // Maximum throughput: rounds interleaved across targets, median per target.
      const maxRounds: Record<string, WrkResult[]> = {};
      for (const t of targets) wrk(t, BODIES[mode], { connections, seconds: 1 }); // warm-up
      for (let round = 0; round < rounds; round++) {
        for (const t of targets) (maxRounds[t.name] ??= []).push(wrk(t, BODIES[mode], { connections, seconds }));
      }
      const max = Object.fromEntries(Object.entries(maxRounds).map(([k, v]) => [k, medianBy(v, (r) => r.rps)]));
      for (const t of targets) console.error(`[bench] ${mode} max ${t.name}: ${max[t.name]!.rps.toFixed(0)} req/s (median of ${rounds})`);
      // Latency at half of dispatch's maximum: paced rounds, interleaved, paired differences against direct.
      const rate = Math.round(max.dispatch!.rps / 2);
      const rateRounds: Record<string, WrkResult[]> = {};
      for (let round = 0; round < rounds; round++) {
        for (const t of targets) (rateRounds[t.name] ??= []).push(wrk(t, BODIES[mode], { connections, seconds, rate }));
      }
      const at_half = Object.fromEntries(Object.entries(rateRounds).map(([k, v]) => [k, medianBy(v, (r) => r.p50_ms)]));
      const added = (name: string) => ({
        p50_ms: median(rateRounds[name]!.map((r, i) => r.p50_ms - rateRounds.direct![i]!.p50_ms)),
        p99_ms: median(rateRounds[name]!.map((r, i) => r.p99_ms - rateRounds.direct![i]!.p99_ms)),
      });
      for (const t of targets) {
        const r = at_half[t.name]!;
        console.error(`[bench] ${mode} @${rate} req/s ${t.name}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50_ms.toFixed(3)} ms, p99 ${r.p99_ms.toFixed(3)} ms`);
      }
      const addedAll = Object.fromEntries(targets.filter((t) => t.name !== "direct").map((t) => [t.name, added(t.name)]));
      results[mode] = { max, rate, at_half, added: addedAll, rounds: { max: maxRounds, at_half: rateRounds } };
    }
    const load_after = loadavg();

    const summary = Object.fromEntries(
      (Object.keys(results) as Mode[]).map((mode) => {
        const r = results[mode];
        return [
          mode,
          {
            dispatch_added_p50_ms: r.added.dispatch!.p50_ms,
            dispatch_added_p99_ms: r.added.dispatch!.p99_ms,
            minimal_proxy_added_p50_ms: r.added["minimal-proxy"]!.p50_ms,
            minimal_proxy_added_p99_ms: r.added["minimal-proxy"]!.p99_ms,
            portkey_added_p50_ms: r.added.portkey!.p50_ms,
            portkey_added_p99_ms: r.added.portkey!.p99_ms,
            throughput_ratio_vs_portkey: r.max.dispatch!.rps / r.max.portkey!.rps,
            throughput_share_of_direct: r.max.dispatch!.rps / r.max.direct!.rps,
            throughput_share_of_minimal_proxy: r.max.dispatch!.rps / r.max["minimal-proxy"]!.rps,
          },
        ];
      }),
    );
    const git = (args: string[]) => Bun.spawnSync(["git", ...args], { cwd: ROOT }).stdout.toString().trim();
    const dirty = git(["status", "--porcelain", "--", "gateway", "common", "proto"]) !== "";
    const report = {
      date: new Date().toISOString(),
      commit: `${git(["rev-parse", "--short", "HEAD"])}${dirty ? " (gateway/ had uncommitted changes)" : ""}`,
      command: "npm run bench:gateway",
      machine: {
        cpus: cpus().length,
        cpu_model: cpus()[0]?.model ?? "unknown",
        bun: Bun.version,
        load_average_before: load_before,
        load_average_after: load_after,
      },
      settings: { wrk: `wrk -t1 -c${connections} -d${seconds}s`, connections, seconds, rounds, pacing: "wall-clock schedule", chunks_per_stream: 64 },
      results,
      summary,
    };
    const dir = join(ROOT, "bench/gateway/results");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${report.date.replace(/[:.]/g, "-")}.json`);
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    const all = readdirSync(dir)
      .filter((n) => n.endsWith(".json"))
      .sort()
      .map((n) => ({ file: n, report: JSON.parse(readFileSync(join(dir, n), "utf8")) }));
    writeFileSync(join(ROOT, "docs/gateway-bench.md"), renderMarkdown(report, file.slice(ROOT.length), all));
    console.log(JSON.stringify(summary, null, 2));
    console.error(`[bench] wrote ${file} and docs/gateway-bench.md`);
  } finally {
    stopAll(procs);
  }
}

await main();
