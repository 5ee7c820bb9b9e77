/**
 * The gateway's added time to first byte, request by request: an instant model server
 * (instant-server.ts: the real service and engine, `--instant-ms` per step, CPU free meanwhile),
 * one or more gateways in front of it, and one client that sends each request to every
 * target in turn (every order of the targets in turn, concurrency 1): straight to the server over
 * Connect (a fetch-based client, connect-stream.ts, the request encoded before the clock
 * starts) and through each gateway (`POST /v1/completions`, token-id prompt, streaming, the
 * body serialized before the clock starts). TTFT = until the first response body bytes (the
 * first Generate message, the first SSE chunk). Interleaving per request, not per round,
 * keeps the machine's drift (2 shared cores) out of the differences.
 *
 *   bun bench/gateway/ttft-ab.ts [--requests 600] [--input-len 512] [--output-len 4] [--instant-ms 0]
 *     [--gateway-main /tmp/old/gateway/src/main.ts ...] [--env-b K=V] [--proxy] [--endpoint completions|chat] [--responses] [--messages]
 *
 * --endpoint chat: the gateways get `POST /v1/chat/completions` with one user message of
 * `--input-len` random words (the gateway renders the chat template and tokenizes it); direct and
 * the proxy still send `--input-len` token ids, so against them the figure is approximate: compare
 * gateways with each other.
 *
 * --responses (with --endpoint chat): each gateway also gets the same request as `POST /v1/responses` (one string
 * input, streamed; to its first body bytes, the created event sent with the first token), next to its chat figure;
 * --messages likewise as Anthropic's `POST /v1/messages` (message_start with the first token).
 *
 * --env-b K=V: start a second copy of this checkout's gateway with that environment (an env
 * switch's before/after in one run). --proxy: also through connect-proxy.ts (the same Connect
 * client through a Bun hop that only forwards bytes: the floor of any proxy here). Prints per target the TTFT median and p10..p90, and per
 * gateway the median of the per-request differences to direct and to the first gateway, with
 * the medians of 4 quarters of the run (their spread is the noise).
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { GenerateRequestSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { connectServerStream } from "../../gateway/src/rpc/connect-stream";
import { type Child, createChildren, freePort, ROOT } from "./processes";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "600" },
    "input-len": { type: "string", default: "512" },
    "output-len": { type: "string", default: "4" },
    "instant-ms": { type: "string", default: "0" },
    "gateway-main": { type: "string", multiple: true, default: [] },
    "env-b": { type: "string", multiple: true, default: [] },
    proxy: { type: "boolean", default: false },
    endpoint: { type: "string", default: "completions" },
    responses: { type: "boolean", default: false },
    messages: { type: "boolean", default: false },
    vocab: { type: "string", default: "4000" },
    model: { type: "string", default: join(ROOT, "model-server/models/tiny-wordnet-moe") },
  },
});
const N = Math.min(Math.max(8, Number(values.requests)), 20_000);
const inputLen = Number(values["input-len"]);
const outputLen = Number(values["output-len"]);
const vocab = Number(values.vocab);
const chat = values.endpoint === "chat";
if (!chat && values.endpoint !== "completions") throw new Error(`--endpoint must be completions or chat, got '${values.endpoint}'`);
if ((values.responses || values.messages) && !chat) throw new Error("--responses and --messages compare with chat: add --endpoint chat");
const WORDS = "the of and to in is was for on that with as by at from his her an which be this are were had it not or have one their all but two new more who they has been also after first its other some time into only over can most when during then there three these up out many both where about such".split(" ");

const { spawn, stop } = createChildren();
process.on("SIGINT", () => (stop(), process.exit(130)));

async function ready(what: string, p: Child, probe: () => Promise<boolean>): Promise<void> {
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    if (p.exitCode !== null) throw new Error(`${what} exited with status ${p.exitCode}`);
    if (await probe().catch(() => false)) return;
    await Bun.sleep(200);
  }
  throw new Error(`${what} not ready after 60 s`);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const pct = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

function permutations(xs: number[]): number[][] {
  if (xs.length <= 1) return [xs];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));
}

let seed = 12345;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const prompt = () => Array.from({ length: inputLen }, () => Math.floor(rand() * vocab));

/** Time to the first body bytes, then the rest drained; ms. */
async function timeBody(start: number, res: Response): Promise<number> {
  if (res.status !== 200 || !res.body) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const first = await reader.read();
  const t = performance.now() - start;
  if (first.done) throw new Error("empty body");
  for (;;) if ((await reader.read()).done) break;
  return t;
}

try {
  const msPort = await freePort();
  const server = spawn(["bench/gateway/instant-server.ts", "--model", values.model!, "--port", String(msPort), "--device-ms", values["instant-ms"]!, "--max-num-seqs", "4"]);
  const msUrl = `http://127.0.0.1:${msPort}`;
  const gws: { name: string; main: string; env: Record<string, string> }[] = [{ name: "gateway", main: join(ROOT, "gateway/src/main.ts"), env: {} }];
  for (const kv of values["env-b"] as string[]) {
    const [k, v] = kv.split("=") as [string, string];
    gws.push({ name: `gateway[${kv}]`, main: join(ROOT, "gateway/src/main.ts"), env: { [k]: v } });
  }
  for (const [i, m] of (values["gateway-main"] as string[]).entries()) gws.push({ name: `gateway${i + 1}`, main: m, env: {} });
  const targets: { name: string; send: (ids: number[]) => Promise<number> }[] = [];
  let model = "";
  for (const g of gws) {
    const port = await freePort();
    const p = spawn([g.main, "--port", String(port), "--backend", `dispatch=${msUrl}`], { DISPATCH_LOG_LEVEL: "warn", ...g.env });
    const url = `http://127.0.0.1:${port}`;
    await ready(g.name, p, async () => {
      const body = (await (await fetch(`${url}/v1/models`)).json()) as { data?: { id: string }[] };
      model = body.data?.[0]?.id ?? "";
      return model !== "";
    });
    console.error(`[ttft-ab] ${g.name}: ${g.main} at ${url}${Object.keys(g.env).length ? ` ${JSON.stringify(g.env)}` : ""}`);
    targets.push({
      name: g.name,
      send: async (ids) => {
        const body = chat
          ? JSON.stringify({ model, messages: [{ role: "user", content: ids.map((i) => WORDS[i % WORDS.length]).join(" ") }], max_tokens: outputLen, ignore_eos: true, stream: true, temperature: 0 })
          : JSON.stringify({ model, prompt: ids, max_tokens: outputLen, ignore_eos: true, stream: true, temperature: 0 });
        const t0 = performance.now();
        return timeBody(t0, await fetch(`${url}/v1/${chat ? "chat/completions" : "completions"}`, { method: "POST", headers: { "content-type": "application/json" }, body }));
      },
    });
    if (values.messages) {
      targets.push({
        name: `${g.name} /v1/messages`,
        send: async (ids) => {
          const body = JSON.stringify({ model, max_tokens: outputLen, messages: [{ role: "user", content: ids.map((i) => WORDS[i % WORDS.length]).join(" ") }], stream: true, temperature: 0 });
          const t0 = performance.now();
          return timeBody(t0, await fetch(`${url}/v1/messages`, { method: "POST", headers: { "content-type": "application/json" }, body }));
        },
      });
    }
    if (values.responses) {
      targets.push({
        name: `${g.name} /v1/responses`,
        send: async (ids) => {
          const body = JSON.stringify({ model, input: ids.map((i) => WORDS[i % WORDS.length]).join(" "), max_output_tokens: outputLen, ignore_eos: true, stream: true, temperature: 0 });
          const t0 = performance.now();
          return timeBody(t0, await fetch(`${url}/v1/responses`, { method: "POST", headers: { "content-type": "application/json" }, body }));
        },
      });
    }
  }
  const connectTo = (url: string) => async (ids: number[]) => {
    const request = toBinary(GenerateRequestSchema, create(GenerateRequestSchema, { model, promptTokenIds: ids, sampling: { temperature: 0 }, stop: { maxTokens: outputLen, ignoreEos: true } }));
    const t0 = performance.now();
    let t = 0;
    for await (const _ of connectServerStream({ url, method: "dispatch.v1.ModelService/Generate", request, signal: AbortSignal.timeout(30_000) })) if (t === 0) t = performance.now() - t0;
    return t;
  };
  if (values.proxy) {
    const port = await freePort();
    const p = spawn(["bench/gateway/connect-proxy.ts", "--port", String(port), "--upstream", msUrl]);
    const url = `http://127.0.0.1:${port}`;
    await ready("connect-proxy", p, async () => (await connectTo(url)([1, 2, 3])) > 0);
    targets.push({ name: "connect-proxy", send: connectTo(url) });
  }
  targets.unshift({ name: "direct", send: connectTo(msUrl) });
  for (let i = 0; i < 30; i++) for (const t of targets) await t.send(prompt()); // warm-up
  const ttft: Record<string, number[]> = Object.fromEntries(targets.map((t) => [t.name, []]));
  // Every order of the targets in turn, not rotations: a target run right after another
  // gateway process finds the shared native code warm in the CPU caches, and with rotations
  // one gateway would follow the other far more often than the reverse (measured: a ~50 us bias).
  const perms = permutations(targets.map((_, i) => i));
  for (let i = 0; i < N; i++) {
    for (const j of perms[i % perms.length]!) {
      const t = targets[j]!;
      ttft[t.name]!.push(await t.send(prompt()));
    }
  }
  console.log(`\nTTFT (to first body bytes), ${N} requests per target interleaved, ${inputLen} in / ${outputLen} out, ${chat ? "chat (words)" : "completions (token ids)"}, instant server ${values["instant-ms"]} ms/step`);
  for (const t of targets) {
    const xs = ttft[t.name]!;
    console.log(`${t.name.padEnd(28)} median ${median(xs).toFixed(3)} ms  p10..p90 ${pct(xs, 0.1).toFixed(3)}..${pct(xs, 0.9).toFixed(3)}`);
  }
  const q = Math.floor(N / 4);
  const diff = (a: string, b: string) => {
    const d = ttft[a]!.map((x, i) => (x - ttft[b]![i]!) * 1000);
    const quarters = [0, 1, 2, 3].map((k) => median(d.slice(k * q, (k + 1) * q)).toFixed(0));
    return `${median(d).toFixed(0)} us (quarters ${quarters.join(", ")})`;
  };
  for (const t of targets.slice(1)) console.log(`${t.name} - direct: ${diff(t.name, "direct")}`);
  for (const t of targets.slice(2).filter((t) => t.name !== "connect-proxy")) console.log(`${t.name} - gateway: ${diff(t.name, "gateway")}`);
} finally {
  stop();
}
