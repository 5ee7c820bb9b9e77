/**
 * The engine's host time per step, with a runner that costs nothing (engine/testing/instant-runner.ts:
 * the CUDA runner's host work, packStep included, and no kernels). N concurrent generate() streams
 * of --tokens tokens after --prompt-token prompts, consumed as the RPC service does (each output
 * converted to its protobuf GenerateResponse), returnText on.
 *
 *   bun bench/model-server/engine-overhead.ts [--streams 64] [--prompt 512] [--tokens 256] [--repeat 5] [--path sampled|forward] [--vocab 151936]
 *
 * Reports, per repeat, over the steps where every sequence decodes one token at full batch:
 * the gap between steps (from one runner call's return to the next call: schedule, StepInput,
 * accept, detokenize, stream emission and the consumers' turn on the event loop), its p50/p99,
 * the runner's own host time (pack + sampling parameters) p50, and the engine's phase split
 * (from EngineOptions.onStep) p50.
 * --path forward: the CPU backend's path (logits downloaded, sampled on the host); slow at a real
 * vocabulary, so give it a smaller --vocab.
 */
import { createEngine as defaultCreateEngine, type StepStats } from "../../model-server/src/engine/engine";
import { resolve } from "node:path";
import { createInstantRunner } from "../../model-server/src/engine/testing/instant-runner";
import { toGenerateResponse } from "../../model-server/src/rpc/convert";
import { startRpcServer } from "../../model-server/src/rpc/server";
import { createServingState, type ModelMeta } from "../../model-server/src/rpc/serving-state";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";

interface Args {
  streams: number;
  prompt: number;
  tokens: number;
  repeat: number;
  path: "sampled" | "forward";
  vocab: number;
  /** Serve through the real Connect service (Bun.serve, in-process) to clients in a child process. */
  rpc: boolean;
  /** Internal: be that child, streaming from this URL. */
  client?: string;
  seed: number;
  /** Simulated device time per step (instant-runner deviceMs). */
  deviceMs: number;
  /** Engine module to measure (default: the engine); for before/after comparisons. */
  engine?: string;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { streams: 64, prompt: 512, tokens: 256, repeat: 5, path: "sampled", vocab: 151936, rpc: false, seed: 1, deviceMs: 0 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${k} needs a value`);
      return x;
    };
    const int = (lo: number, hi: number) => {
      const n = Number(v());
      if (!Number.isInteger(n) || n < lo || n > hi) throw new Error(`${k} must be an integer in [${lo}, ${hi}]`);
      return n;
    };
    if (k === "--streams") a.streams = int(1, 1024);
    else if (k === "--prompt") a.prompt = int(1, 8192);
    else if (k === "--tokens") a.tokens = int(1, 4096);
    else if (k === "--repeat") a.repeat = int(1, 50);
    else if (k === "--vocab") a.vocab = int(64, 262144);
    else if (k === "--rpc") a.rpc = true;
    else if (k === "--device-ms") a.deviceMs = int(0, 1000);
    else if (k === "--engine") a.engine = v();
    else if (k === "--client") a.client = v();
    else if (k === "--seed") a.seed = int(0, 1e6);
    else if (k === "--path") {
      const p = v();
      if (p !== "sampled" && p !== "forward") throw new Error("--path is sampled or forward");
      a.path = p;
    } else throw new Error(`unknown argument ${k}`);
  }
  return a;
}

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

const enc = new TextEncoder();
// Byte strings of 1-6 ASCII letters, some multi-byte characters split across two tokens.
function makeTokenBytes(V: number): (id: number) => Uint8Array {
  const table: Uint8Array[] = [];
  const euro = enc.encode("€");
  return (id) => {
    let b = table[id];
    if (!b) {
      if (id % 97 === 0) b = euro.subarray(0, 2);
      else if (id % 97 === 1) b = euro.subarray(2);
      else b = enc.encode(" " + "abcdefghijklmnopqrstuvwxyz".slice(id % 20, (id % 20) + 1 + (id % 6)));
      if (id < V) table[id] = b;
    }
    return b;
  };
}

interface RunResult {
  gaps: number[];
  periods: number[];
  pack: number[];
  phases: Record<string, number[]>;
  wallS: number;
  tokens: number;
  chars: number;
}

async function runOnce(a: Args, seed: number, createEngine: typeof defaultCreateEngine): Promise<RunResult> {
  const runner = createInstantRunner({ vocabSize: a.vocab, sampled: a.path === "sampled", deviceMs: a.deviceMs });
  const B = 16;
  const perSeq = Math.ceil((a.prompt + a.tokens) / B) + 1;
  const phases: Record<string, number[]> = {};
  let onStepExtra: ((s: StepStats) => void) | null = null;
  const engine = createEngine({
    runner,
    blockSize: B,
    numKvBlocks: a.streams * perSeq + 64,
    maxNumSeqs: a.streams,
    maxBatchTokens: 8192,
    maxQueue: 1024,
    serverId: "bench",
    tokenBytes: makeTokenBytes(a.vocab),
    onStep: (s: StepStats) => {
      onStepExtra?.(s);
      if (!s.hostMs || s.sequences !== a.streams || s.prefillTokens > 0) return;
      for (const [k, v] of Object.entries(s.hostMs)) (phases[k] ??= []).push(v);
    },
  });
  const t0 = performance.now();
  let tokens = 0;
  let chars = 0;
  if (a.rpc) {
    const state = createServingState();
    const server = await startRpcServer({ state, host: "127.0.0.1", port: 0 });
    const meta: ModelMeta = { tokenizer: { pattern: "\\S+", ranks: new Uint8Array(0), specialTokens: {} }, chatTemplate: "", bosToken: "", eosToken: "" };
    state.setServing(engine, meta);
    const metricsStep = server.metrics.engine.step;
    onStepExtra = (s) => metricsStep(s);
    const child = Bun.spawn([process.execPath, import.meta.path, "--client", server.url, "--streams", `${a.streams}`, "--prompt", `${a.prompt}`, "--tokens", `${a.tokens}`, "--vocab", `${a.vocab}`, "--seed", `${seed}`], { stdout: "pipe", stderr: "inherit" });
    const timer = setTimeout(() => child.kill(), 120_000);
    const text = await new Response(child.stdout).text();
    clearTimeout(timer);
    if ((await child.exited) !== 0) throw new Error(`client process failed: ${text}`);
    const got = JSON.parse(text) as { tokens: number; chars: number };
    tokens = got.tokens;
    chars = got.chars;
    await server.stop();
  } else {
    const consume = async (i: number) => {
      const stream = engine.generate({ promptTokenIds: promptFor(a, seed, i), stop: { maxTokens: a.tokens, ignoreEos: true }, returnText: true });
      for await (const out of stream) {
        const r = toGenerateResponse(out);
        tokens += r.tokenIds.length;
        chars += r.textDelta.length;
      }
    };
    await Promise.all(Array.from({ length: a.streams }, (_, i) => consume(i)));
  }
  const wallS = (performance.now() - t0) / 1000;
  await engine.close();
  const st = runner.stats;
  const gaps: number[] = [];
  const periods: number[] = [];
  const pack: number[] = [];
  // A decode step at full batch, preceded by one: its gap is pure decode bookkeeping.
  for (let i = 1; i < st.steps; i++) {
    if (st.decodeOnly[i] && st.decodeOnly[i - 1] && st.batch[i] === a.streams && st.batch[i - 1] === a.streams) {
      gaps.push(st.gapMs[i]!);
      periods.push(st.periodMs[i]!);
      pack.push(st.packMs[i]!);
    }
  }
  return { gaps, periods, pack, phases, wallS, tokens, chars };
}

function promptFor(a: Args, seed: number, i: number): number[] {
  return Array.from({ length: a.prompt }, (_, j) => (seed * 7919 + i * 131 + j * 17) % (a.vocab - 1));
}

/** The client side of --rpc: the streams over Connect (binary, HTTP/1.1, as bench/model-server/run.ts). */
async function runClient(a: Args, url: string): Promise<void> {
  const client = createClient(ModelService, createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: true }));
  let tokens = 0;
  let chars = 0;
  await Promise.all(
    Array.from({ length: a.streams }, async (_, i) => {
      for await (const r of client.generate({ promptTokenIds: promptFor(a, a.seed, i), stop: { maxTokens: a.tokens, ignoreEos: true }, returnText: true })) {
        tokens += r.tokenIds.length;
        chars += r.textDelta.length;
      }
    }),
  );
  process.stdout.write(JSON.stringify({ tokens, chars }));
}

const a = parseArgs(process.argv.slice(2));
if (a.client) {
  await runClient(a, a.client);
  process.exit(0);
}
// Static by default, so the script bundles (bun build) for a machine without node_modules.
const createEngine = a.engine ? ((await import(resolve(a.engine))) as { createEngine: typeof defaultCreateEngine }).createEngine : defaultCreateEngine;
console.log(
  `engine host time per step: ${a.streams} streams x ${a.tokens} tokens, ${a.prompt}-token prompts, block 16, returnText, path ${a.path}, vocab ${a.vocab}, ` +
    `device ${a.deviceMs} ms/step, ${a.rpc ? "through Connect RPC (clients in a child process)" : "consumed in-process"}${a.engine ? `, engine ${a.engine}` : ""}`,
);
const gapP50: number[] = [];
const overP50: number[] = [];
for (let r = 0; r < a.repeat; r++) {
  const x = await runOnce(a, r + 1, createEngine);
  if (x.tokens !== a.streams * a.tokens) throw new Error(`expected ${a.streams * a.tokens} tokens, got ${x.tokens}`);
  const ph = Object.entries(x.phases)
    .map(([k, v]) => `${k} ${pct(v, 50).toFixed(3)}`)
    .join(", ");
  // Host time the device waits for: the step period beyond the device's own time.
  const over = x.periods.map((p) => p - a.deviceMs);
  gapP50.push(pct(x.gaps, 50));
  overP50.push(pct(over, 50));
  console.log(
    `run ${r + 1}: ${x.gaps.length} full-batch decode steps; gap (result -> next call) p50 ${pct(x.gaps, 50).toFixed(3)} ms, p99 ${pct(x.gaps, 99).toFixed(3)} ms; ` +
      `period - device p50 ${pct(over, 50).toFixed(3)} ms, p99 ${pct(over, 99).toFixed(3)} ms; runner pack p50 ${pct(x.pack, 50).toFixed(3)} ms; ` +
      `engine phases p50 (ms): ${ph || "-"}; wall ${x.wallS.toFixed(2)} s (${((a.streams * a.tokens) / x.wallS).toFixed(0)} tok/s), ${x.chars} chars`,
  );
}
const summary = (xs: number[]) => `mean ${(xs.reduce((s, v) => s + v, 0) / xs.length).toFixed(3)} ms (min ${Math.min(...xs).toFixed(3)}, max ${Math.max(...xs).toFixed(3)})`;
console.log(`over ${a.repeat} runs: gap p50 ${summary(gapP50)}; period - device p50 ${summary(overP50)}`);
