/**
 * The gateway's share of TTFT and ITL in front of a real model server, on one machine: a CPU
 * model server (default: the bundled tiny-wordnet-moe), one or more gateways in front of it
 * (this checkout's gateway, and with --gateway-main a second one, e.g. an older commit unpacked
 * with `git archive`), and serve-bench runs in rotation through each gateway and straight to
 * the server over Connect (`--target rpc`): fresh prompts every run (no prefix-cache hits),
 * the same concurrency and lengths for every target.
 *
 *   bun bench/gateway/serve-overhead.ts [--concurrency 1,16] [--rounds 6] [--prompts 16]
 *     [--input-len 512] [--output-len 16] [--gateway-main /tmp/old/gateway/src/main.ts]
 *     [--model model-server/models/tiny-wordnet-moe] [--json out.jsonl] [--instant-ms 2]
 *
 * --instant-ms: serve with bench/gateway/instant-server.ts (the real service and engine over a
 * runner that answers each step after that many ms, CPU free meanwhile) instead of the CPU
 * model server, so a 512-token prefill costs milliseconds and the gateway's share is not
 * buried under ~100 ms of CPU prefill on the same cores.
 *
 * Each round runs the targets in a rotated order (D G1 G2, G1 G2 D, ...). Per run: TTFT p50,
 * ITL p50/p99, output tok/s, failures. Per target: the median over rounds and the spread
 * (min..max); per gateway: the median over rounds of (gateway TTFT p50 - direct TTFT p50 of
 * the same round). Processes are killed by pid at the end; every wait is bounded.
 */
import { writeFileSync, appendFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runBench, type BenchResult } from "../serving/serve-bench";
import { type Child, createChildren, freePort, ROOT } from "./processes";

const { values } = parseArgs({
  options: {
    concurrency: { type: "string", default: "1,16" },
    rounds: { type: "string", default: "6" },
    prompts: { type: "string", default: "" },
    "input-len": { type: "string", default: "512" },
    "output-len": { type: "string", default: "16" },
    "gateway-main": { type: "string", multiple: true, default: [] },
    model: { type: "string", default: join(ROOT, "model-server/models/tiny-wordnet-moe") },
    vocab: { type: "string", default: "4000" },
    json: { type: "string" },
    seed: { type: "string", default: "1000" },
    "instant-ms": { type: "string" },
  },
});
const conc = values.concurrency!.split(",").map(Number);
const rounds = Math.min(Math.max(1, Number(values.rounds)), 50);
const inputLen = Number(values["input-len"]);
const outputLen = Number(values["output-len"]);
const vocab = Number(values.vocab);
const log = (m: string) => console.error(`[serve-overhead] ${m}`);
const emit = (o: unknown) => {
  if (values.json) appendFileSync(values.json, `${JSON.stringify(o)}\n`);
};
if (values.json) writeFileSync(values.json, "");

const { spawn, stop } = createChildren();
process.on("SIGINT", () => (stop(), process.exit(130)));
process.on("SIGTERM", () => (stop(), process.exit(143)));

async function waitFor(what: string, p: Child, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (p.exitCode !== null) throw new Error(`${what} exited with status ${p.exitCode}`);
    try {
      if (await probe()) return;
    } catch {
      // not up yet
    }
    await Bun.sleep(200);
  }
  throw new Error(`${what} not ready after ${timeoutMs} ms`);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

try {
  const msPort = await freePort();
  const maxConc = Math.max(...conc);
  const server = values["instant-ms"] !== undefined
    ? spawn(["bench/gateway/instant-server.ts", "--model", values.model!, "--port", String(msPort), "--device-ms", values["instant-ms"], "--max-num-seqs", String(Math.max(maxConc, 1))])
    : spawn(["model-server/src/main.ts", "--model", values.model!, "--port", String(msPort), "--backend", "cpu", "--max-num-seqs", String(Math.max(maxConc, 1))]);
  const msUrl = `http://127.0.0.1:${msPort}`;
  const mains = [join(ROOT, "gateway/src/main.ts"), ...(values["gateway-main"] as string[])];
  const gateways: { name: string; url: string }[] = [];
  for (const [i, main] of mains.entries()) {
    const port = await freePort();
    const gw = spawn([main, "--port", String(port), "--backend", `dispatch=${msUrl}`], { DISPATCH_LOG_LEVEL: "warn" });
    const url = `http://127.0.0.1:${port}`;
    let model = "";
    await waitFor(`gateway ${main}`, gw, async () => {
      const body = (await (await fetch(`${url}/v1/models`)).json()) as { data?: { id: string }[] };
      model = body.data?.[0]?.id ?? "";
      return model !== "";
    }, 60_000);
    if (server.exitCode !== null) throw new Error("the model server exited");
    gateways.push({ name: i === 0 ? "gateway" : `gateway${i}`, url });
    log(`${i === 0 ? "gateway" : `gateway${i}`}: ${main} at ${url}, model ${model}`);
  }
  const model = ((await (await fetch(`${gateways[0]!.url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
  const targets = [{ name: "direct", url: msUrl, rpc: true }, ...gateways.map((g) => ({ ...g, rpc: false }))];
  let seed = Number(values.seed);

  for (const c of conc) {
    const n = values.prompts ? Number(values.prompts) : Math.max(8, 2 * c);
    const run = (t: (typeof targets)[number]): Promise<BenchResult> =>
      runBench({ baseUrl: t.url, target: t.rpc ? "rpc" : "openai", model, numPrompts: n, inputLen, outputLen, requestRate: Infinity, maxConcurrency: c, vocab, seed: seed++ });
    for (const t of targets) await run(t); // warm-up, not measured
    const rows: Record<string, { ttft: number; itl50: number; itl99: number; tokS: number; failed: number }[]> = {};
    for (let r = 0; r < rounds; r++) {
      const order = targets.map((_, i) => targets[(i + r) % targets.length]!);
      for (const t of order) {
        const res = await run(t);
        const s = res.summary;
        const row = { ttft: s.ttftMs.p50, itl50: s.itlMs.p50, itl99: s.itlMs.p99, tokS: s.outputTokS, failed: s.failed };
        (rows[t.name] ??= []).push(row);
        emit({ concurrency: c, round: r, target: t.name, ...row, errors: res.errors });
        if (s.failed) log(`c=${c} ${t.name}: ${s.failed} failed: ${res.errors.join("; ")}`);
      }
    }
    const fmt = (xs: number[], d = 2) => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}..${Math.max(...xs).toFixed(d)})`;
    console.log(`\nconcurrency ${c}: ${rounds} rounds x ${n} prompts, ${inputLen} in / ${outputLen} out; median (min..max) over rounds`);
    console.log(`${"target".padEnd(10)} ${"TTFT p50 ms".padEnd(24)} ${"ITL p50 ms".padEnd(20)} ${"ITL p99 ms".padEnd(20)} ${"out tok/s".padEnd(24)} failed`);
    for (const t of targets) {
      const rs = rows[t.name]!;
      console.log(
        `${t.name.padEnd(10)} ${fmt(rs.map((x) => x.ttft)).padEnd(24)} ${fmt(rs.map((x) => x.itl50)).padEnd(20)} ${fmt(rs.map((x) => x.itl99)).padEnd(20)} ${fmt(rs.map((x) => x.tokS), 0).padEnd(24)} ${rs.reduce((a, x) => a + x.failed, 0)}`,
      );
    }
    for (const g of gateways) {
      const added = rows[g.name]!.map((x, i) => x.ttft - rows.direct![i]!.ttft);
      const pct = rows[g.name]!.map((x, i) => (100 * (x.ttft - rows.direct![i]!.ttft)) / rows.direct![i]!.ttft);
      console.log(`${g.name}: adds ${fmt(added)} ms to TTFT p50 (${fmt(pct, 1)} %), per-round differences`);
      emit({ kind: "summary", concurrency: c, target: g.name, addedTtftMs: median(added), addedTtftPct: median(pct), addedMin: Math.min(...added), addedMax: Math.max(...added) });
    }
    // Gateways against each other, paired by round (the first gateway is this checkout's).
    for (const g of gateways.slice(1)) {
      const d = rows[g.name]!.map((x, i) => x.ttft - rows.gateway![i]!.ttft);
      console.log(`${g.name} - gateway: ${fmt(d)} ms TTFT p50, per-round differences`);
    }
  }
} finally {
  stop();
}
