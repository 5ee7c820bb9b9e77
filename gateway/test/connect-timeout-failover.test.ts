/**
 * upstream.connect_timeout_ms through the gateway: a dispatch server whose
 * address stops accepting connections (SYN-SENT forever, test/hanging-listener.ts)
 * is given up on after the bound, and the request is served by the other
 * server, exactly as when the address refuses connections: one retry, counted
 * and logged against the server that failed.
 */
import { afterEach, expect, test } from "bun:test";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { type HangingListener, startHangingListener } from "./hanging-listener";
import { startGateway, type TestGateway } from "./start-gateway";

const messages = [{ role: "user" as const, content: "hi" }];
const BOUND_MS = 250;
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A gateway over fakes x and y, both probed healthy; then x's address refuses or hangs. */
async function setUp(x_becomes: "refused" | "hanging"): Promise<{ x: ConnectFake; y: ConnectFake; t: TestGateway }> {
  const x = await startConnectFake({ serverId: "x" });
  const y = await startConnectFake({ serverId: "y" });
  cleanup.push(() => y.stop());
  const t = await startGateway({
    backends: [
      { kind: "dispatch", url: x.url, id: "x" },
      { kind: "dispatch", url: y.url, id: "y" },
    ],
    routing: { policy: "round-robin" },
    retry: { max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0 },
    health: { unhealthy_after: 1 }, // x leaves the rotation after its one failed call
    upstream: { connect_timeout_ms: BOUND_MS },
    logging: { requests: false },
  });
  cleanup.push(() => t.stop());
  expect(t.gw.pool.get("x")!.healthy).toBe(true);
  expect(t.gw.pool.get("y")!.healthy).toBe(true);
  x.stop(); // no Generate went to x yet: the gateway holds no connection to it
  if (x_becomes === "hanging") {
    const port = Number(new URL(x.url).port);
    let h: HangingListener | null = null;
    for (let i = 0; i < 40 && !h; i++) h = await startHangingListener(port).catch(() => Bun.sleep(25).then(() => null));
    if (!h) throw new Error(`could not listen on x's port ${port} again`);
    cleanup.push(() => h.stop());
  }
  return { x, y, t };
}

async function retriesOf(t: TestGateway, backend: string): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const m = new RegExp(`^dispatch_gateway_retries_total\\{backend="${backend}"\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

for (const mode of ["refused", "hanging"] as const) {
  test(`x's address ${mode === "refused" ? "refuses connections" : "hangs in connect"}: every request is served by y, x is retried away from once`, async () => {
    const { x, y, t } = await setUp(mode);
    const took: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const r = await t.client.chat.completions.create({ model: "fake-moe", messages });
      took.push(performance.now() - t0);
      expect(r.choices[0]!.message.content).toBe("Hello, world!");
    }
    expect(x.generateCalls).toBe(0);
    expect(y.generateCalls).toBe(3);
    expect(await retriesOf(t, "x")).toBe(1);
    expect(t.gw.pool.get("x")!.healthy).toBe(false);
    t.gw.log.flush(); // the logger batches lines for up to 50 ms
    const retried = t.logs.filter((l) => l.includes("retrying on another backend"));
    expect(retried.length).toBe(1);
    expect(retried[0]).toContain(`Model server ${x.url} is unavailable`);
    const slow = took.filter((ms) => ms >= BOUND_MS - 5);
    if (mode === "hanging") {
      const port = new URL(x.url).port;
      expect(retried[0]).toContain(`connecting to 127.0.0.1:${port} timed out after ${BOUND_MS} ms`);
      expect(slow.length).toBe(1); // the request that tried x waited the bound, then went to y
      expect(Math.max(...took)).toBeLessThan(BOUND_MS + 1000);
    } else expect(slow.length).toBe(0);
  }, 15_000);
}
