/**
 * Smoke test of the chart against the real programs: start the model server
 * and the gateway as their containers would (same entry points, the env and
 * config file the chart renders, only host/port/model path moved to loopback),
 * then run every probe the chart declares the way the kubelet does, scrape
 * /metrics, and send one chat completion through the gateway.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { renderChart } from "../renderer/chart";
import { CHART_DIR } from "../scripts/plain-manifests";
import { bundledModelDir } from "../../model-server/test/harness";

type Obj = Record<string, any>;
const root = join(import.meta.dir, "..", "..");
const procs: Subprocess[] = [];
let output = "";

const objects = renderChart(CHART_DIR, {
  values: { modelServer: { gpus: 0 }, discovery: { mode: "static", static: [{ url: "http://127.0.0.1:1", kind: "dispatch" }] }, redis: { enabled: false } },
}).map((o) => o.object as Obj);
const deployment = (name: string) => objects.find((o) => o.kind === "Deployment" && o.metadata.name === name)!;
const container = (name: string) => deployment(name).spec.template.spec.containers[0];

function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = s.port;
  s.stop(true);
  return p;
}

/** The container's env as the kubelet would set it (fieldRef/secretKeyRef given placeholder values). */
function envOf(c: Obj): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) env[e.name] = e.value ?? "placeholder";
  return env;
}

function start(entry: string, env: Record<string, string>): Subprocess {
  const proc = Bun.spawn([process.execPath, join(root, entry)], { env: { PATH: process.env.PATH ?? "", ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  for (const s of [proc.stdout, proc.stderr]) {
    void (async () => {
      const d = new TextDecoder();
      for await (const chunk of s as ReadableStream<Uint8Array>) output += d.decode(chunk, { stream: true });
    })();
  }
  procs.push(proc);
  return proc;
}

/** Runs an httpGet probe like the kubelet: named port resolved through the container's ports, 2xx/3xx passes. */
async function probe(c: Obj, kind: string, ports: Record<string, number>): Promise<number> {
  const p = c[kind].httpGet;
  const port = typeof p.port === "string" ? ports[p.port] : p.port;
  try {
    const res = await fetch(`http://127.0.0.1:${port}${p.path}`, { signal: AbortSignal.timeout((c[kind].timeoutSeconds ?? 1) * 1000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

async function until(f: () => Promise<boolean>, ms: number, what: string) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await Bun.sleep(50);
  }
  throw new Error(`timed out waiting for ${what}\n${output.slice(-3000)}`);
}

const msPort = freePort();
const gwPort = freePort();
const ms = container("dispatch-model-server");
const gw = container("dispatch-gateway");

beforeAll(async () => {
  start("model-server/src/main.ts", { ...envOf(ms), DISPATCH_MS_HOST: "127.0.0.1", DISPATCH_MS_PORT: String(msPort), DISPATCH_MODEL_PATH: bundledModelDir() });
  const dir = mkdtempSync(join(tmpdir(), "dispatch-smoke-"));
  const cm = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "dispatch-gateway")!;
  const config = cm.data["gateway.yaml"].replace("http://127.0.0.1:1", `http://127.0.0.1:${msPort}`);
  writeFileSync(join(dir, "gateway.yaml"), config);
  start("gateway/src/main.ts", {
    ...envOf(gw),
    DISPATCH_CONFIG: join(dir, "gateway.yaml"),
    DISPATCH_SERVER_HOST: "127.0.0.1",
    DISPATCH_SERVER_PORT: String(gwPort),
    DISPATCH_HEALTH_INTERVAL_MS: "200",
  });
});

afterAll(async () => {
  for (const p of procs) p.kill("SIGTERM");
  await Promise.all(procs.map((p) => Promise.race([p.exited, Bun.sleep(5000).then(() => p.kill("SIGKILL"))])));
});

test("model-server probes: startup and liveness pass on /healthz, readiness on /readyz once serving", async () => {
  const ports = { rpc: msPort };
  await until(async () => (await probe(ms, "startupProbe", ports)) === 200, 60_000, "model-server startup probe");
  expect(await probe(ms, "livenessProbe", ports)).toBe(200);
  await until(async () => (await probe(ms, "readinessProbe", ports)) === 200, 60_000, "model-server readiness");
  const metrics = await (await fetch(`http://127.0.0.1:${msPort}/metrics`)).text();
  for (const name of ["dispatch_ms_kv_blocks_used", "dispatch_ms_kv_blocks_total", "dispatch_ms_waiting_sequences", "dispatch_ms_batch_size_sequences"]) expect(metrics).toContain(name);
}, 90_000);

test("gateway probes pass against the config the chart renders, and a request goes through", async () => {
  const ports = { http: gwPort };
  await until(async () => (await probe(gw, "startupProbe", ports)) === 200, 30_000, "gateway startup probe");
  expect(await probe(gw, "livenessProbe", ports)).toBe(200);
  await until(async () => (await probe(gw, "readinessProbe", ports)) === 200, 30_000, "gateway readiness (a healthy backend)");
  const models = (await (await fetch(`http://127.0.0.1:${gwPort}/v1/models`)).json()) as { data: { id: string }[] };
  expect(models.data.length).toBeGreaterThan(0);
  const res = await fetch(`http://127.0.0.1:${gwPort}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: models.data[0]!.id, messages: [{ role: "user", content: "hello" }], max_tokens: 4 }),
  });
  const body = (await res.json()) as { choices?: unknown[]; usage?: { completion_tokens: number } };
  expect(res.status).toBe(200);
  expect(body.choices?.length).toBe(1);
  const metrics = await (await fetch(`http://127.0.0.1:${gwPort}/metrics`)).text();
  expect(metrics).toContain('dispatch_gateway_requests_total{endpoint="chat",status="200",stream="false"} 1');
}, 60_000);
