/**
 * Quick (CI): with API keys required (`auth.api_keys`), abused credentials
 * (missing, empty, wrong scheme, huge, non-ASCII, near-misses of the key, many
 * Authorization headers' worth of junk) get a 401 in OpenAI's error shape on
 * every route; the right key still gets through.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Cluster, startCluster } from "../support/cluster";
import { isOpenAIError } from "./http-fuzz";
import { createRng } from "./rng";

const KEY = "sk-fuzz-key-0123456789";
const SEED = Number(process.env.DISPATCH_FUZZ_SEED ?? 20261129);
let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ servers: 1, apiKey: KEY, gatewayEnv: { DISPATCH_AUTH_API_KEYS: KEY } });
}, 30_000);
afterAll(async () => {
  await c?.stop();
});

test("bad credentials: 401 in OpenAI's shape, 300 generated cases; the right key works", async () => {
  const r = createRng(SEED);
  const wrong = (): string | undefined => {
    const k = r.int(0, 9);
    if (k === 0) return undefined;
    if (k === 1) return "";
    if (k === 2) return `Basic ${KEY}`;
    if (k === 3) return `Bearer ${KEY.slice(0, -1)}`;
    if (k === 4) return `Bearer ${KEY}x`;
    if (k === 5) return `Bearer ${KEY.toUpperCase()}`;
    if (k === 6) return `Bearer ${"k".repeat(r.int(1000, 8000))}`;
    if (k === 7) return `Bearer ${r.string(r.int(1, 64), "\u00e9\u00ff\u0100abc")}`.replace(/[^\u0000-\u00ff]/g, "?");
    if (k === 8) return `bearer  ${KEY} `.slice(0, r.int(6, 30));
    return `Bearer ${r.string(r.int(1, 80))}`;
  };
  const routes = ["/v1/chat/completions", "/v1/completions", "/v1/models"];
  const problems: string[] = [];
  for (let i = 0; i < 300; i++) {
    const path = r.pick(routes);
    const auth = wrong();
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (auth !== undefined) headers.authorization = auth;
    const body = path === "/v1/models" ? undefined : JSON.stringify({ model: c.model, messages: [{ role: "user", content: "x" }], prompt: "x", max_tokens: 1 });
    const res = await fetch(`${c.gateway.url}${path}`, { method: body ? "POST" : "GET", headers, body, signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {}
    if (res.status !== 401 || !isOpenAIError(parsed)) problems.push(`${i} ${path} ${JSON.stringify(auth?.slice(0, 40))}: ${res.status} ${text.slice(0, 120)}`);
  }
  console.log(JSON.stringify({ fuzz: "auth", seed: SEED, sent: 300, problems: problems.length }));
  expect(problems).toEqual([]);
  const ok = await fetch(`${c.gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: c.model, messages: [{ role: "user", content: "x" }], max_tokens: 1 }),
  });
  expect(ok.status).toBe(200);
  expect((await fetch(`${c.gateway.url}/healthz`)).status).toBe(200);
}, 40_000);
