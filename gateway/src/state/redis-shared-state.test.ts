import { afterAll, describe, expect, test } from "bun:test";
import { spawn, type Subprocess } from "bun";
import { redisServerArgv, requireRedisServer, startRedisServer, testRedis, waitForLoopbackPort } from "@dispatch/common/src/testing/redis";
import { createRouter, type Router } from "../routing/router";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { createRedisSharedState, type SharedState } from "./redis-shared-state";

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

function replica(url: string, id: string, channel: string, deadlineMs = 5): { router: Router; shared: SharedState } {
  const shared = createRedisSharedState({ url, replicaId: id, channel, deadlineMs });
  const router = createRouter({ policy: "dispatch", blockSize: 16, rand: createSeededRand(1), onUpdate: (u) => shared.publish(u) });
  shared.onRemote((u) => router.applyRemote(u));
  for (const b of ["a", "b", "c"]) router.addBackend(b, "approximate");
  cleanups.push(() => shared.close());
  return { router, shared };
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await Bun.sleep(5);
  }
  return cond();
}

const req = (n: number) => ({ blockHashes: [BigInt(n), BigInt(n + 1), BigInt(n + 2)], promptTokens: 50, blockSize: 16 });

describe("shared routing state over Redis", () => {
  test("one replica's routing shows up in the other's prefix index and load", async () => {
    const { url } = await testRedis();
    const channel = `t:${crypto.randomUUID()}`;
    const one = replica(url, "one", channel);
    const two = replica(url, "two", channel);
    expect(await one.shared.ready(3000)).toBe(true);
    expect(await two.shared.ready(3000)).toBe(true);
    const d = one.router.choose(req(100));
    one.router.onRouted("r1", req(100), d.backendId);
    expect(await until(() => two.shared.stats().received >= 1, 2000)).toBe(true);
    const seen = two.router.views(req(100)).find((v) => v.id === d.backendId)!;
    expect(seen).toMatchObject({ matchedBlocks: 3, outstanding: 1 });
    one.router.onFinished("r1");
    expect(await until(() => two.router.views(req(100)).find((v) => v.id === d.backendId)!.outstanding === 0, 2000)).toBe(true);
    // Own messages are not applied twice.
    expect(one.shared.stats().received).toBe(0);
  });

  test("redis-server stopped mid-run: no request fails or waits, and sharing resumes when it returns", async () => {
    // its own redis-server (stopped and restarted below), on a port that was free
    let { proc, port, url } = await startRedisServer();
    cleanups.push(() => proc.kill());
    const channel = "fail-open";
    const one = replica(url, "one", channel);
    const two = replica(url, "two", channel);
    expect(await one.shared.ready(3000)).toBe(true);
    expect(await two.shared.ready(3000)).toBe(true);

    let worst = 0;
    const route = (i: number) => {
      const t0 = performance.now();
      const d = one.router.choose(req(i * 10));
      one.router.onRouted(`r${i}`, req(i * 10), d.backendId);
      one.router.onFinished(`r${i}`);
      worst = Math.max(worst, performance.now() - t0);
    };
    for (let i = 0; i < 50; i++) route(i);
    expect(await until(() => two.shared.stats().received >= 100, 2000)).toBe(true);

    proc.kill();
    await proc.exited;
    for (let i = 50; i < 300; i++) {
      route(i);
      if (i % 25 === 0) await Bun.sleep(2);
    }
    expect(await until(() => one.shared.stats().publishFailed > 0, 2000)).toBe(true);
    expect(worst).toBeLessThan(50);

    proc = startRedis(port);
    expect(await waitPort(port)).toBe(true);
    const before = two.shared.stats().received;
    // ioredis reconnects (backoff <= 1 s) and resubscribes; keep routing until an update gets through.
    const resumed = await until(() => {
      route(1000 + Math.floor(Math.random() * 1e6));
      return two.shared.stats().received > before;
    }, 5000);
    expect(resumed).toBe(true);
  }, 20_000);

  test("a Redis that accepts connections but never answers costs each call at most its deadline", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    cleanups.push(() => silent.stop(true));
    const errors: unknown[] = [];
    const shared = createRedisSharedState({ url: `redis://127.0.0.1:${silent.port}`, replicaId: "x", deadlineMs: 5, onError: (e) => errors.push(e) });
    cleanups.push(() => shared.close());
    expect(await shared.ready(100)).toBe(false);
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) shared.publish({ kind: "finished", requestId: `r${i}` });
    expect(performance.now() - t0).toBeLessThan(20);
    expect(await until(() => shared.stats().publishFailed === 20, 1000)).toBe(true);
    expect(shared.stats().published).toBe(0);
  });
});

function startRedis(port: number): Subprocess {
  requireRedisServer();
  return spawn(redisServerArgv(port), { stdout: "ignore", stderr: "ignore" });
}

const waitPort = (port: number) => waitForLoopbackPort(port, 3000, 20);
