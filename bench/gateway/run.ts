/**
 * Gateway benchmark: added latency and maximum throughput of dispatch's
 * gateway against a direct connection and against the Portkey gateway, in
 * one run, same upstream, same load generator (wrk).
 *
 *   npm run bench:gateway [-- --seconds 5 --connections 50]
 *
 * Writes bench/gateway/results/<timestamp>.json and docs/gateway-bench.md.
 */
import { writeFileSync, mkdirSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { ensureWrk, type Target, wrk, wrkAtRate, type WrkResult } from "./load";
import { freePort, type Proc, ROOT, start, stopAll, waitReady } from "./processes";
import { renderMarkdown } from "./report";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}
const seconds = arg("seconds", 5);
const connections = arg("connections", 50);

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
  const [up, gw, pk] = [await freePort(), await freePort(), await freePort()];
  const upstreamUrl = `http://127.0.0.1:${up}/v1`;
  const procs: Proc[] = [];
  try {
    procs.push(start("upstream", ["bench/gateway/upstream.ts", "--port", String(up)], up));
    await waitReady(procs[0]!, () => fetch(`${upstreamUrl}/models`));
    procs.push(start("dispatch", ["gateway/src/main.ts", "--port", String(gw)], gw, { DISPATCH_BACKENDS: `openai=${upstreamUrl}` }));
    await waitReady(procs[1]!, () => fetch(`http://127.0.0.1:${gw}/readyz`));
    procs.push(start("portkey", ["node_modules/@portkey-ai/gateway/build/start-server.js", `--port=${pk}`, "--headless"], pk));
    await waitReady(procs[2]!, () => fetch(`http://127.0.0.1:${pk}/`));

    const targets: Target[] = [
      { name: "direct", url: `${upstreamUrl}/chat/completions`, headers: {} },
      { name: "dispatch", url: `http://127.0.0.1:${gw}/v1/chat/completions`, headers: {} },
      {
        name: "portkey",
        url: `http://127.0.0.1:${pk}/v1/chat/completions`,
        headers: { "x-portkey-provider": "openai", "x-portkey-custom-host": upstreamUrl, authorization: "Bearer sk-bench" },
      },
    ];
    for (const t of targets) for (const m of Object.keys(BODIES) as Mode[]) await check(t, m);

    const load_before = loadavg();
    const results: Record<Mode, { max: Record<string, WrkResult>; rate: number; at_half: Record<string, WrkResult & { delay_ms: number }> }> = {} as never;
    for (const mode of Object.keys(BODIES) as Mode[]) {
      const max: Record<string, WrkResult> = {};
      for (const t of targets) {
        wrk(t, BODIES[mode], { connections, seconds: 1 }); // warm-up
        max[t.name] = wrk(t, BODIES[mode], { connections, seconds });
        console.error(`[bench] ${mode} max ${t.name}: ${max[t.name]!.rps.toFixed(0)} req/s`);
      }
      const rate = Math.round(max.dispatch!.rps / 2);
      const at_half: Record<string, WrkResult & { delay_ms: number }> = {};
      for (const t of targets) {
        at_half[t.name] = wrkAtRate(t, BODIES[mode], { connections, seconds, rate });
        const r = at_half[t.name]!;
        console.error(`[bench] ${mode} @${rate} req/s ${t.name}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50_ms.toFixed(3)} ms, p99 ${r.p99_ms.toFixed(3)} ms`);
      }
      results[mode] = { max, rate, at_half };
    }
    const load_after = loadavg();

    const summary = Object.fromEntries(
      (Object.keys(results) as Mode[]).map((mode) => {
        const r = results[mode];
        const d = r.at_half.direct!;
        return [
          mode,
          {
            dispatch_added_p50_ms: r.at_half.dispatch!.p50_ms - d.p50_ms,
            dispatch_added_p99_ms: r.at_half.dispatch!.p99_ms - d.p99_ms,
            portkey_added_p50_ms: r.at_half.portkey!.p50_ms - d.p50_ms,
            portkey_added_p99_ms: r.at_half.portkey!.p99_ms - d.p99_ms,
            throughput_ratio_vs_portkey: r.max.dispatch!.rps / r.max.portkey!.rps,
            throughput_share_of_direct: r.max.dispatch!.rps / r.max.direct!.rps,
          },
        ];
      }),
    );
    const report = {
      date: new Date().toISOString(),
      command: "npm run bench:gateway",
      machine: {
        cpus: cpus().length,
        cpu_model: cpus()[0]?.model ?? "unknown",
        bun: Bun.version,
        load_average_before: load_before,
        load_average_after: load_after,
      },
      settings: { wrk: `wrk -t1 -c${connections} -d${seconds}s`, connections, seconds, chunks_per_stream: 64 },
      results,
      summary,
    };
    const dir = join(ROOT, "bench/gateway/results");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${report.date.replace(/[:.]/g, "-")}.json`);
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(join(ROOT, "docs/gateway-bench.md"), renderMarkdown(report, file.slice(ROOT.length)));
    console.log(JSON.stringify(summary, null, 2));
    console.error(`[bench] wrote ${file} and docs/gateway-bench.md`);
  } finally {
    stopAll(procs);
  }
}

await main();
