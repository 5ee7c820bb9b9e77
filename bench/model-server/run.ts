/**
 * Serving throughput of one model server, measured through its Connect-RPC API
 * (what the gateway sees): N concurrent Generate streams, each a chat prompt
 * rendered with the server's own template and tokenizer (from GetModelInfo),
 * generating a fixed number of tokens (ignore_eos) with greedy sampling.
 *
 *   bun bench/model-server/run.ts --model model-server/models/<dir> [--streams 1,8] [--tokens 128] [--repeat 2]
 *   bun bench/model-server/run.ts --url http://127.0.0.1:50051 ...   # an already running server
 *
 * Reports, per concurrency, the mean over --repeat runs of: total generated tokens / wall time, per-stream
 * decode rate after the first token, and time to first token. With --model it
 * starts the server itself (as `npm start` would) and stops it afterwards.
 */
import { spawn, type Subprocess } from "bun";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Template } from "@huggingface/jinja";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { ServingStatus } from "@dispatch/proto/gen/dispatch/v1/health_pb";
import { Tiktoken } from "tiktoken";
import os from "node:os";
import { join } from "node:path";

interface Args {
  url?: string;
  model?: string;
  streams: number[];
  tokens: number;
  repeat: number;
  serverArgs: string[];
}

function parseArgs(argv: string[]): Args {
  const a: Args = { streams: [1, 8], tokens: 128, repeat: 2, serverArgs: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${k} needs a value`);
      return x;
    };
    if (k === "--url") a.url = v();
    else if (k === "--model") a.model = v();
    else if (k === "--streams") a.streams = v().split(",").map(Number);
    else if (k === "--tokens") a.tokens = Number(v());
    else if (k === "--repeat") a.repeat = Number(v());
    else if (k === "--") a.serverArgs = argv.slice(i + 1), (i = argv.length);
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.url && !a.model) throw new Error("give --model <dir> (start a server) or --url <base url>");
  return a;
}

const QUESTIONS = ["What does river mean?", "What is a telescope?", "Define the verb whisper.", "What is music?", "What does brave mean?", "What is a harbor?", "Define the noun lantern.", "What does it mean to borrow?"];

async function startServer(model: string, extra: string[]): Promise<{ url: string; proc: Subprocess }> {
  const root = join(import.meta.dir, "..", "..");
  const proc = spawn([process.execPath, join(root, "model-server/src/main.ts"), "--model", model, "--port", "0", ...extra], { stdout: "pipe", stderr: "inherit" });
  const reader = proc.stdout.getReader();
  let buf = "";
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += new TextDecoder().decode(value);
    const m = buf.match(/ready: .* at (http:\/\/\S+)/);
    if (m) {
      reader.releaseLock();
      void proc.stdout.pipeTo(new WritableStream());
      return { url: m[1]!, proc };
    }
  }
  proc.kill();
  throw new Error(`model server did not become ready:\n${buf}`);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const server = args.model ? await startServer(args.model, args.serverArgs) : null;
  const url = server?.url ?? args.url!;
  try {
    const client = createClient(ModelService, createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: true }));
    const health = await client.health({});
    if (health.status !== ServingStatus.SERVING) throw new Error(`server not serving: ${health.message}`);
    const info = await client.getModelInfo({});
    const tk = new Tiktoken(new TextDecoder().decode(info.tokenizer!.ranks), info.tokenizer!.specialTokens, info.tokenizer!.pattern);
    const template = new Template(info.chatTemplate);
    const prompt = (q: string) =>
      Array.from(tk.encode(template.render({ messages: [{ role: "user", content: q }], add_generation_prompt: true, bos_token: info.bosToken, eos_token: info.eosToken }), "all"));

    async function one(i: number) {
      const t0 = performance.now();
      let first = 0;
      let n = 0;
      for await (const r of client.generate({ promptTokenIds: prompt(QUESTIONS[i % QUESTIONS.length]!), stop: { maxTokens: args.tokens, ignoreEos: true } })) {
        if (n === 0 && r.tokenIds.length > 0) first = performance.now();
        n += r.tokenIds.length;
      }
      const end = performance.now();
      return { n, ttftMs: first - t0, decodeTps: (n - 1) / ((end - first) / 1000) };
    }

    // Warm-up: first-touch costs (JIT, allocations) are not serving speed.
    await one(0);
    const cpu = os.cpus()[0]?.model ?? "unknown CPU";
    console.log(`# ${info.modelId} (${info.architecture}, ${info.backend}), ${os.cpus().length} cores: ${cpu}; ${args.tokens} tokens per stream, greedy, ignore_eos`);
    console.log("| streams | total tokens/s | per-stream decode tokens/s | TTFT ms (mean) |");
    console.log("| --- | --- | --- | --- |");
    for (const c of args.streams) {
      const runs: { tps: number; per: number; ttft: number }[] = [];
      for (let r = 0; r < args.repeat; r++) {
        const t0 = performance.now();
        const res = await Promise.all(Array.from({ length: c }, (_, i) => one(i)));
        const secs = (performance.now() - t0) / 1000;
        const total = res.reduce((s, x) => s + x.n, 0);
        const run = { tps: total / secs, per: res.reduce((s, x) => s + x.decodeTps, 0) / c, ttft: res.reduce((s, x) => s + x.ttftMs, 0) / c };
        runs.push(run);
      }
      // Mean over the repeats (not the best run).
      const mean = (f: (x: (typeof runs)[number]) => number) => runs.reduce((s, x) => s + f(x), 0) / runs.length;
      console.log(`| ${c} | ${mean((x) => x.tps).toFixed(1)} | ${mean((x) => x.per).toFixed(1)} | ${mean((x) => x.ttft).toFixed(0)} |`);
    }
    tk.free();
  } finally {
    server?.proc.kill();
    await server?.proc.exited;
  }
}

await main();
