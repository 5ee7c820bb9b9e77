/**
 * Failover between dispatch model servers, bounded retries, ejection and
 * return, and SSE streams that stay quiet longer than Bun's idle timeout.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Code } from "@connectrpc/connect";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { startGateway, type TestGateway } from "./start-gateway";
import { startGatewayOverTwoFakes, type TwoFakes } from "./two-fakes";

let f: TwoFakes;
let x: ConnectFake;
let y: ConnectFake;
let t: TestGateway;
const messages = [{ role: "user" as const, content: "hi" }];

beforeAll(async () => {
  f = await startGatewayOverTwoFakes({
    routing: { policy: "round-robin" },
    retry: { max_attempts: 2, backoff_ms: 30, max_backoff_ms: 30 },
    server: { idle_timeout_s: 1 },
    logging: { requests: false },
  });
  ({ x, y, t } = f);
});
afterAll(() => f.stop());

test("a failure before the first token is retried on the other server", async () => {
  x.failBeforeFirst = 1;
  for (let i = 0; i < 2; i++) {
    const r = await t.client.chat.completions.create({ model: "fake-moe", messages });
    expect(r.choices[0]!.message.content).toBe("Hello, world!");
  }
  expect(x.generateCalls + y.generateCalls).toBe(3);
  expect(x.failBeforeFirst).toBe(0);
});

test("retries are bounded and back off", async () => {
  x.failBeforeFirst = y.failBeforeFirst = 5;
  const calls = x.generateCalls + y.generateCalls;
  const t0 = performance.now();
  const err = await t.client.chat.completions.create({ model: "fake-moe", messages }).catch((e) => e);
  expect(err.status).toBe(503);
  expect(x.generateCalls + y.generateCalls - calls).toBe(2);
  expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
  x.failBeforeFirst = y.failBeforeFirst = 0;
  await t.gw.health.checkNow();
});

test("a server failing its health checks is ejected and returns when it recovers", async () => {
  x.serving = false;
  await t.gw.health.checkNow();
  await t.gw.health.checkNow();
  expect(t.gw.pool.get("x")!.healthy).toBe(false);
  const before = x.generateCalls;
  for (let i = 0; i < 4; i++) await t.client.chat.completions.create({ model: "fake-moe", messages });
  expect(x.generateCalls).toBe(before);
  x.serving = true;
  await t.gw.health.checkNow();
  expect(t.gw.pool.get("x")!.healthy).toBe(true);
  for (let i = 0; i < 4; i++) await t.client.chat.completions.create({ model: "fake-moe", messages });
  expect(x.generateCalls).toBe(before + 2);
});

test("an SSE stream quiet for longer than the idle timeout (1 s) survives", async () => {
  // Bun checks idle sockets every few seconds: 4.5 s of silence is cut without the exemption.
  x.reply = y.reply = "ab";
  x.pauseAt = y.pauseAt = 1;
  x.pauseMs = y.pauseMs = 4500;
  const s = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
  let text = "";
  for await (const c of s) text += c.choices[0]?.delta.content ?? "";
  expect(text).toBe("ab");
}, 10_000);

test("a gateway started before its model server is serving becomes ready soon after it is", async () => {
  const late = await startConnectFake({ serverId: "late" });
  late.serving = false;
  const g = await startGateway({ backends: [{ kind: "dispatch", url: late.url }], health: { interval_ms: 60_000 }, logging: { requests: false } });
  try {
    expect((await fetch(`${g.url}/readyz`)).status).toBe(503);
    late.serving = true;
    const t0 = performance.now();
    while ((await fetch(`${g.url}/readyz`)).status !== 200 && performance.now() - t0 < 3000) await Bun.sleep(20);
    expect(performance.now() - t0).toBeLessThan(1500);
    const r = await g.client.chat.completions.create({ model: "fake-moe", messages });
    expect(r.choices[0]!.message.content).toBe("Hello, world!");
  } finally {
    await g.stop();
    late.stop();
  }
});

test("server.request_timeout_ms: 504 before the first token, one SSE error event after it", async () => {
  const slow = await startConnectFake({ serverId: "slow" });
  const g = await startGateway({ backends: [{ kind: "dispatch", url: slow.url }], server: { request_timeout_ms: 300 }, logging: { requests: false } });
  try {
    slow.pauseAt = 0;
    slow.pauseMs = 1000;
    const err = await g.client.chat.completions.create({ model: "fake-moe", messages }).catch((e) => e);
    expect(err.status).toBe(504);
    expect(err.code).toBe("upstream_timeout");
    slow.pauseAt = 3;
    const res = await fetch(`${g.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", messages, stream: true }) });
    const frames = (await res.text()).split("\n\n").filter(Boolean);
    expect(JSON.parse(frames.at(-1)!.slice(6)).error.code).toBe("upstream_timeout");
    const until = performance.now() + 500;
    while (slow.cancels.length < 2 && performance.now() < until) await Bun.sleep(5);
    expect(slow.cancels.length).toBe(2);
  } finally {
    await g.stop();
    slow.stop();
  }
});
