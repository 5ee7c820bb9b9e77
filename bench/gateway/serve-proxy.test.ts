import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createChildren, freePort } from "./processes";

// The two bare proxies run as the benchmarks run them (bun child processes from createChildren)
// in front of a loopback upstream that echoes what reached it.
const { spawn, stop } = createChildren();
let upstream: ReturnType<typeof Bun.serve>;

beforeAll(() => {
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const seen = { method: req.method, path: new URL(req.url).pathname, type: req.headers.get("content-type"), connect: req.headers.get("connect-protocol-version"), body: await req.text() };
      return new Response(JSON.stringify(seen), { status: 201, headers: { "content-type": "application/x-echo" } });
    },
  });
});
afterAll(() => {
  stop();
  upstream.stop(true);
});

async function startProxy(script: string, upstreamPath: string): Promise<string> {
  const port = await freePort();
  const child = spawn([`bench/gateway/${script}`, "--port", String(port), "--upstream", `http://127.0.0.1:${upstream.port}${upstreamPath}`]);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`${script} exited with status ${child.exitCode}`);
    const up = await fetch(`${base}/ping`).then((r) => r.arrayBuffer().then(() => true), () => false);
    if (up) return base;
    await Bun.sleep(100);
  }
  throw new Error(`${script} not up after 10 s`);
}

describe("bench proxies (serveProxy)", () => {
  test("minimal-proxy.ts drops /v1, forwards a POST body as JSON and pipes the answer back", async () => {
    const base = await startProxy("minimal-proxy.ts", "/v1");
    const r = await fetch(`${base}/v1/chat/completions`, { method: "POST", body: '{"a":1}', headers: { "content-type": "text/plain" } });
    expect(r.status).toBe(201);
    expect(r.headers.get("content-type")).toBe("application/x-echo");
    expect(await r.json()).toEqual({ method: "POST", path: "/v1/chat/completions", type: "application/json", connect: null, body: '{"a":1}' });
  });

  test("connect-proxy.ts forwards path, bytes and content type with the Connect protocol header", async () => {
    const base = await startProxy("connect-proxy.ts", "");
    const r = await fetch(`${base}/dispatch.v1.Generate/Stream`, { method: "POST", body: "xyz", headers: { "content-type": "application/connect+proto" } });
    expect(r.status).toBe(201);
    expect(r.headers.get("content-type")).toBe("application/x-echo");
    expect(await r.json()).toEqual({ method: "POST", path: "/dispatch.v1.Generate/Stream", type: "application/connect+proto", connect: "1", body: "xyz" });
  });
});
