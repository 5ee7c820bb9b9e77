/**
 * The gateway's memory under prompts that share little: the gateway in front of the fake
 * OpenAI-compatible upstream (fake-upstream.ts), `--requests` non-streamed chat completions at
 * `--concurrency`, each with its own `--prompt-bytes` of text (so each adds new prefix blocks to
 * the routing's popularity counts and prefix index), the gateway's RSS sampled throughout.
 * Prints one JSON line: RSS at the start, the end and its peak, MiB, the requests per second, and both
 * per sixth of the requests (`slices`).
 * Before session 27 the popularity counts kept every block for ~1M blocks whatever its age
 * (~210 MB); the GPU soak (bench/serving/device-soak.ts) saw the gateway grow 24 MiB/min.
 *
 *   bun bench/gateway/memory.ts --requests 20000 --concurrency 32 --prompt-bytes 4096 [--endpoint chat|responses|messages] [--store]
 *
 * --endpoint responses / messages: the same requests as the Responses API's (not stored, unless --store: then the
 * memory store fills to its bounds, responses.max_entries / max_bytes) or Anthropic's Messages API's.
 */
import { parseArgs } from "node:util";
import { procStats } from "../../test/support/proc-stats";
import { freePort, start, stopAll, waitReady, type Proc } from "./processes";

const { values: a } = parseArgs({
  options: {
    requests: { type: "string", default: "20000" },
    concurrency: { type: "string", default: "32" },
    "prompt-bytes": { type: "string", default: "4096" },
    env: { type: "string", multiple: true, default: [] },
    endpoint: { type: "string", default: "chat" },
    store: { type: "boolean", default: false },
  },
});
const total = Number(a.requests);
const conc = Number(a.concurrency);
const promptBytes = Number(a["prompt-bytes"]);
if (!(total >= 1 && conc >= 1 && promptBytes >= 16)) throw new Error("--requests, --concurrency >= 1 and --prompt-bytes >= 16 are required");
const extraEnv = Object.fromEntries((a.env as string[]).map((kv) => kv.split("=", 2) as [string, string]));
const endpoint = a.endpoint!;
if (!["chat", "responses", "messages"].includes(endpoint)) throw new Error(`--endpoint must be chat, responses or messages, got '${endpoint}'`);
const path = { chat: "/v1/chat/completions", responses: "/v1/responses", messages: "/v1/messages" }[endpoint as "chat"];
const bodyFor = (text: string) =>
  endpoint === "responses"
    ? { model: "bench-model", input: text, store: a.store }
    : endpoint === "messages"
      ? { model: "bench-model", max_tokens: 64, messages: [{ role: "user", content: text }] }
      : { model: "bench-model", messages: [{ role: "user", content: text }] };

const procs: Proc[] = [];
try {
  const [up, gw] = [await freePort(), await freePort()];
  const upstreamUrl = `http://127.0.0.1:${up}/v1`;
  procs.push(start("upstream", ["bench/gateway/upstream.ts", "--port", String(up)], up));
  await waitReady(procs[0]!, () => fetch(`${upstreamUrl}/models`));
  const gateway = start("dispatch", ["gateway/src/main.ts", "--port", String(gw)], gw, { DISPATCH_BACKENDS: `openai=${upstreamUrl}`, DISPATCH_LOG_LEVEL: "error", ...extraEnv });
  procs.push(gateway);
  await waitReady(gateway, () => fetch(`http://127.0.0.1:${gw}/readyz`));
  const url = `http://127.0.0.1:${gw}${path}`;
  const rss = () => Math.round((procStats(gateway.proc.pid)?.rssKiB ?? 0) / 1024);
  // every request's own text: its index spelled out through the prompt, so no two share a block
  const words = ["amber", "basil", "cedar", "delta", "ember", "fjord", "grove", "heron", "iris", "juniper"];
  const prompt = (i: number) => {
    let s = "";
    for (let k = 0; s.length < promptBytes; k++) s += `${words[(i + k) % 10]}${i.toString(36)}${k} `;
    return s.slice(0, promptBytes);
  };
  const send = async (i: number) => {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(bodyFor(prompt(i))) });
    if (res.status !== 200) throw new Error(`request ${i}: HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
    await res.arrayBuffer();
  };
  for (let i = 0; i < 200; i++) await send(-1 - i); // warm-up: JIT, connections
  Bun.gc(true);
  const startMiB = rss();
  let peak = startMiB;
  const sampler = setInterval(() => (peak = Math.max(peak, rss())), 250);
  const t0 = performance.now();
  let next = 0;
  const slices: { requests: number; requestsPerS: number; rssMiB: number }[] = [];
  const slice = Math.max(1, Math.floor(total / 6));
  let sliceStart = t0;
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < total) {
      const i = next++;
      await send(i);
      if ((i + 1) % slice === 0) {
        const now = performance.now();
        slices.push({ requests: i + 1, requestsPerS: Math.round((slice * 1000) / (now - sliceStart)), rssMiB: rss() });
        sliceStart = now;
      }
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const endMiB = rss();
  console.log(JSON.stringify({ kind: "gateway-memory", endpoint, store: a.store, requests: total, concurrency: conc, promptBytes, env: extraEnv, seconds: +seconds.toFixed(1), requestsPerS: Math.round(total / seconds), rssMiB: { start: startMiB, end: endMiB, peak: Math.max(peak, endMiB) }, slices }));
} finally {
  stopAll(procs);
}
