/**
 * The production features end to end, on real processes over loopback: a
 * model server and a gateway configured the way the chart configures them,
 * the gateway finding the model server through a (fake) Kubernetes API,
 * hashed API keys with a per-key request limit in a real Redis, and both
 * programs exporting traces over OTLP/HTTP (JSON) to a fake collector.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { testRedis } from "../../common/src/testing/redis";
import { hashApiKey } from "../../gateway/src/auth/key-hash";
import { startFakeKubeApi, type FakeKubeApi } from "../../gateway/src/discovery/fake-kube-api";
import { bundledModelDir } from "../../model-server/test/harness";

const root = join(import.meta.dir, "..", "..");
const KEY = `sk-dispatch-smoke-${crypto.randomUUID()}`;
const PEPPER = "smoke-pepper";
const PROMPT = `a prompt that must not reach the logs ${crypto.randomUUID()}`;
const procs: Subprocess[] = [];
let gatewayOutput = "";
let kube: FakeKubeApi;
let collector: ReturnType<typeof Bun.serve>;
const exported: { service: string; span: Record<string, any> }[] = [];

function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = s.port;
  s.stop(true);
  return p;
}

function start(entry: string, env: Record<string, string>, collect?: (s: string) => void): Subprocess {
  const proc = Bun.spawn([process.execPath, join(root, entry)], { env: { PATH: process.env.PATH ?? "", ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  for (const s of [proc.stdout, proc.stderr]) {
    void (async () => {
      const d = new TextDecoder();
      for await (const chunk of s as ReadableStream<Uint8Array>) collect?.(d.decode(chunk, { stream: true }));
    })();
  }
  procs.push(proc);
  return proc;
}

async function until(f: () => Promise<boolean> | boolean, ms: number, what: string) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await Bun.sleep(50);
  }
  throw new Error(`timed out waiting for ${what}\n${gatewayOutput.slice(-2000)}`);
}

/** OTLP/JSON ids are hex; accept base64 too. */
const hexId = (v: string) => (/^[0-9a-f]+$/.test(v) ? v : Buffer.from(v, "base64").toString("hex"));

const msPort = freePort();
const gwPort = freePort();
const gw = `http://127.0.0.1:${gwPort}`;
const SLICE = {
  metadata: { name: "dispatch-model-server-abc", labels: { "kubernetes.io/service-name": "dispatch-model-server" } },
  addressType: "IPv4",
  ports: [{ name: "rpc", port: msPort, protocol: "TCP" }],
  endpoints: [{ addresses: ["127.0.0.1"], conditions: { ready: true }, targetRef: { kind: "Pod", name: "dispatch-model-server-0" } }],
};
let model = "";

beforeAll(async () => {
  collector = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (new URL(req.url).pathname === "/v1/traces") {
        const body = (await req.json()) as { resourceSpans?: any[] };
        for (const rs of body.resourceSpans ?? []) {
          const service = rs.resource?.attributes?.find((a: any) => a.key === "service.name")?.value?.stringValue ?? "?";
          for (const ss of rs.scopeSpans ?? []) for (const span of ss.spans ?? []) exported.push({ service, span });
        }
      }
      return Response.json({});
    },
  });
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.port}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  };
  kube = startFakeKubeApi({ namespace: "ai" }); // no token: like `kubectl proxy`
  kube.upsert(SLICE);
  const redis = await testRedis();
  start("model-server/src/main.ts", { DISPATCH_MS_HOST: "127.0.0.1", DISPATCH_MS_PORT: String(msPort), DISPATCH_MODEL_PATH: bundledModelDir(), ...otel });
  start(
    "gateway/src/main.ts",
    {
      DISPATCH_SERVER_HOST: "127.0.0.1",
      DISPATCH_SERVER_PORT: String(gwPort),
      DISPATCH_HEALTH_INTERVAL_MS: "200",
      DISPATCH_DISCOVERY_MODE: "kubernetes",
      DISPATCH_DISCOVERY_API_SERVER: kube.url,
      DISPATCH_DISCOVERY_NAMESPACE: "ai",
      DISPATCH_DISCOVERY_LABEL_SELECTOR: "kubernetes.io/service-name=dispatch-model-server",
      DISPATCH_DISCOVERY_PORT_NAME: "rpc",
      DISPATCH_AUTH_PEPPER: PEPPER,
      DISPATCH_AUTH_KEYS: JSON.stringify([{ id: `team-${crypto.randomUUID()}`, hash: hashApiKey(KEY, PEPPER), requests_per_minute: 3 }]),
      DISPATCH_REDIS_URL: redis.url,
      ...otel,
    },
    (s) => (gatewayOutput += s),
  );
  await until(async () => (await fetch(`${gw}/readyz`).catch(() => null))?.status === 200, 60_000, "the gateway to discover a ready model server");
  const models = (await (await fetch(`${gw}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { data: { id: string }[] };
  model = models.data[0]!.id;
}, 90_000);

afterAll(async () => {
  for (const p of procs) p.kill("SIGTERM");
  await Promise.all(procs.map((p) => Promise.race([p.exited, Bun.sleep(5000).then(() => p.kill("SIGKILL"))])));
  kube?.stop();
  collector?.stop(true);
});

const chat = (headers: Record<string, string>) =>
  fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model, messages: [{ role: "user", content: PROMPT }], max_tokens: 3 }),
  });

test("API keys: missing or wrong key is a 401 in OpenAI's shape; the right key passes with rate-limit headers; the 4th request a minute is a 429", async () => {
  const none = await chat({});
  expect(none.status).toBe(401);
  expect(((await none.json()) as any).error).toMatchObject({ type: "invalid_request_error", code: "invalid_api_key" });
  expect((await chat({ authorization: "Bearer sk-wrong" })).status).toBe(401);
  for (let i = 0; i < 3; i++) {
    const ok = await chat({ authorization: `Bearer ${KEY}`, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-ratelimit-limit-requests")).toBe("3");
    await ok.arrayBuffer();
  }
  const limited = await chat({ authorization: `Bearer ${KEY}` });
  expect(limited.status).toBe(429);
  expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  expect(((await limited.json()) as any).error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
});

test("one trace spans the client, the gateway and the model server (OTLP export from both)", async () => {
  const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
  await until(() => exported.some((e) => e.service === "dispatch-model-server" && e.span.name.startsWith("generate")), 10_000, "model-server spans");
  await until(() => exported.some((e) => e.service === "dispatch-gateway" && e.span.name === `chat ${model}`), 10_000, "gateway spans");
  const gwSpans = exported.filter((e) => e.service === "dispatch-gateway" && hexId(e.span.traceId) === CLIENT_TRACE);
  expect(gwSpans.length).toBeGreaterThan(0);
  const gwSpan = gwSpans[0]!.span;
  expect(hexId(gwSpan.parentSpanId)).toBe("00f067aa0ba902b7");
  const attrs = Object.fromEntries(gwSpan.attributes.map((a: any) => [a.key, Object.values(a.value)[0]]));
  expect(attrs["gen_ai.request.model"]).toBe(model);
  expect(attrs["dispatch.route.backend"]).toBe("dispatch-model-server-0");
  expect(gwSpan.events.map((e: any) => e.name)).toContain("dispatch.route");
  const msRoot = exported.find((e) => e.service === "dispatch-model-server" && hexId(e.span.parentSpanId ?? "") === hexId(gwSpan.spanId));
  expect(msRoot?.span.name).toBe(`generate ${model}`);
  expect(hexId(msRoot!.span.traceId)).toBe(CLIENT_TRACE);
  const phases = exported.filter((e) => e.service === "dispatch-model-server" && hexId(e.span.parentSpanId ?? "") === hexId(msRoot!.span.spanId)).map((e) => e.span.name);
  expect(phases.sort()).toEqual(["decode", "prefill", "queue"]);
});

test("production metrics are on the gateway's /metrics", async () => {
  const text = await (await fetch(`${gw}/metrics`)).text();
  expect(text).toContain('dispatch_gateway_auth_failures_total{reason="missing_key"} 1');
  expect(text).toContain('dispatch_gateway_auth_failures_total{reason="invalid_key"} 1');
  expect(text).toContain('dispatch_gateway_rate_limited_total{limit="requests"} 1');
  expect(text).toContain('dispatch_gateway_discovered_backends{source="kubernetes"} 1');
  expect(text).toMatch(/dispatch_gateway_routing_decisions_total\{policy="[^"]+",reason="[^"]+"\} 3/);
});

test("neither the key nor the prompt reaches the gateway's logs", () => {
  expect(gatewayOutput.length).toBeGreaterThan(0);
  expect(gatewayOutput).not.toContain(KEY);
  expect(gatewayOutput).not.toContain(PROMPT);
});

test("a model server that leaves the EndpointSlice leaves the pool", async () => {
  kube.remove(SLICE.metadata.name);
  await until(async () => (await fetch(`${gw}/readyz`)).status === 503, 10_000, "the gateway to drop the removed backend");
});
