/**
 * In-process micro-benchmark of the gateway's per-request cost: an in-process
 * fake OpenAI upstream (`fake-upstream.ts`, as `upstream.ts` serves it) on Bun.serve and
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
import { fakeUpstreamFetch } from "./fake-upstream";
import { forwardOpenAI } from "./serve-proxy";

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const N = Math.min(Number(arg("n", "3000")), 100_000);
const MODE = arg("mode", "both");
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: fakeUpstreamFetch });
const upUrl = `http://127.0.0.1:${upstream.port}/v1`;

const { config } = loadConfig({ argv: [], env: { DISPATCH_BACKENDS: `openai=${upUrl}`, DISPATCH_LOG_LEVEL: "error" } });
const gw = await createGateway(config);

const BODIES = {
  stream: JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say hello." }], stream: true }),
  nonstream: JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say hello." }] }),
};

/** `minimal-proxy.ts`'s handler, called the same way: the floor any in-process proxy pays for its second hop. */
const minimalProxy = (req: Request): Promise<Response> => forwardOpenAI(req, upUrl);

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
