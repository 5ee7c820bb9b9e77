/**
 * In-process micro-benchmark of the gateway's per-request cost: an in-process
 * fake OpenAI upstream (the same responses as `upstream.ts`) on Bun.serve and
 * the gateway's own `fetch` called directly, N requests one after another.
 * Prints wall µs/request for the gateway path and for a direct fetch of the
 * upstream (the floor), their difference, and the difference in process CPU
 * µs/request (the gateway's added CPU, steadier than wall on a busy machine).
 *
 *   bun bench/gateway/micro.ts [--n 3000] [--mode stream|nonstream|both] [--target gateway|minimal] >/dev/null
 *
 * `--target minimal` runs `minimal-proxy.ts`'s handler instead of the gateway.
 */
import { loadConfig } from "../../gateway/src/config/load-config";
import { createGateway } from "../../gateway/src/gateway";

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const N = Math.min(Number(arg("n", "3000")), 100_000);
const MODE = arg("mode", "both");
const CHUNKS = 64;

const base = { id: "chatcmpl-bench", object: "chat.completion.chunk", created: 1700000000, model: "bench-model", system_fingerprint: null };
let sse = `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] })}\n\n`;
for (let i = 0; i < CHUNKS; i++) sse += `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { content: ` tok${i}` }, logprobs: null, finish_reason: null }] })}\n\n`;
sse += `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }] })}\n\n`;
sse += "data: [DONE]\n\n";
const sseBytes = new TextEncoder().encode(sse);
const json = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 1700000000,
  model: "bench-model",
  choices: [{ index: 0, message: { role: "assistant", content: Array.from({ length: CHUNKS }, (_, i) => ` tok${i}`).join("") }, logprobs: null, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: CHUNKS, total_tokens: 12 + CHUNKS },
});
const models = JSON.stringify({ object: "list", data: [{ id: "bench-model", object: "model", created: 0, owned_by: "bench" }] });
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    if (req.method === "GET") return new Response(models, { headers: { "content-type": "application/json" } });
    const body = await req.text();
    if (body.includes('"stream":true')) return new Response(sseBytes, { headers: { "content-type": "text/event-stream" } });
    return new Response(json, { headers: { "content-type": "application/json" } });
  },
});
const upUrl = `http://127.0.0.1:${upstream.port}/v1`;

const { config } = loadConfig({ argv: [], env: { DISPATCH_BACKENDS: `openai=${upUrl}`, DISPATCH_LOG_LEVEL: "error" } });
const gw = await createGateway(config);

const BODIES = {
  stream: JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say hello." }], stream: true }),
  nonstream: JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say hello." }] }),
};

/** `minimal-proxy.ts`'s handler, called the same way: the floor any in-process proxy pays for its second hop. */
async function minimalProxy(req: Request): Promise<Response> {
  const url = new URL(req.url);
  const r = await fetch(upUrl + url.pathname.replace(/^\/v1/, ""), {
    method: req.method,
    body: req.method === "POST" ? await req.text() : undefined,
    headers: { "content-type": "application/json" },
  });
  return new Response(r.body, { status: r.status, headers: { "content-type": r.headers.get("content-type") ?? "application/json" } });
}

const TARGET = arg("target", "gateway"); // gateway | minimal
const handler = TARGET === "minimal" ? minimalProxy : (r: Request) => gw.fetch(r);

async function once(viaGateway: boolean, body: string): Promise<void> {
  const url = viaGateway ? "http://gw.local/v1/chat/completions" : `${upUrl}/chat/completions`;
  const init = { method: "POST", headers: { "content-type": "application/json" }, body };
  const res = viaGateway ? await handler(new Request(url, init)) : await fetch(url, init);
  const text = await res.text();
  if (res.status !== 200 || !text.includes(" tok63")) throw new Error(`unexpected ${res.status}: ${text.slice(0, 200)}`);
}

/** Wall and CPU (user+system, this process: client, gateway and upstream together) µs per request. */
async function measure(viaGateway: boolean, body: string): Promise<{ wall: number; cpu: number }> {
  for (let i = 0; i < Math.min(500, N); i++) await once(viaGateway, body); // warm-up
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await once(viaGateway, body);
  const wall = ((performance.now() - t0) * 1000) / N;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / N };
}

const out: Record<string, number> = {};
try {
  for (const mode of ["stream", "nonstream"] as const) {
    if (MODE !== "both" && MODE !== mode) continue;
    const direct = await measure(false, BODIES[mode]);
    const via = await measure(true, BODIES[mode]);
    const r = (x: number) => Math.round(x * 10) / 10;
    out[`${mode}_direct_us`] = r(direct.wall);
    out[`${mode}_gateway_us`] = r(via.wall);
    out[`${mode}_added_us`] = r(via.wall - direct.wall);
    out[`${mode}_added_cpu_us`] = r(via.cpu - direct.cpu);
  }
  // stderr: the per-request logs go to stdout (redirect it to /dev/null, as the benchmark does).
  console.error(JSON.stringify({ target: TARGET, n: N, ...out }));
} finally {
  await gw.stop();
  upstream.stop(true);
}
