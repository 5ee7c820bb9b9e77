/**
 * A real redis-server on loopback for tests, started once per test process on a
 * free port and stopped when the process exits. `.ci/run` and `npm test`
 * install redis-server from Debian; without it, tests that need Redis fail
 * with this message rather than skip.
 */
import { spawn, type Subprocess } from "bun";

let started: Promise<{ url: string; port: number; proc: Subprocess }> | undefined;

export function testRedis(): Promise<{ url: string; port: number; proc: Subprocess }> {
  started ??= startRedisServer();
  return started;
}

/** Throws the install hint when redis-server is not on PATH (tests that need Redis fail rather than skip). */
export function requireRedisServer(): void {
  if (!Bun.which("redis-server")) throw new Error("redis-server is not installed (apt-get install redis-server)");
}

/** The redis-server command line every test Redis uses: loopback only, no persistence. */
export function redisServerArgv(port: number): string[] {
  return ["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
}

/**
 * A redis-server of the caller's own (tests that stop and restart it) on a free loopback port:
 * up to 5 random ports are tried (one may be taken), each given 3 s to accept connections.
 */
export async function startRedisServer(): Promise<{ url: string; port: number; proc: Subprocess }> {
  requireRedisServer();
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    // setpriv --pdeathsig: the kernel kills redis-server when this test process
    // ends, however it ends (bun test does not always run "exit" handlers).
    const argv = redisServerArgv(port);
    const proc = spawn(Bun.which("setpriv") ? ["setpriv", "--pdeathsig", "KILL", "--", ...argv] : argv, {
      stdout: "ignore",
      stderr: "ignore",
    });
    process.once("exit", () => proc.kill());
    if (await waitForLoopbackPort(port, 3000)) return { url: `redis://127.0.0.1:${port}`, port, proc };
    proc.kill();
  }
  throw new Error("could not start redis-server on loopback");
}

/**
 * Whether something accepts TCP connections on 127.0.0.1:`port` within
 * `timeoutMs`, trying every `everyMs`.
 *
 * @example
 * if (!(await waitForLoopbackPort(port, 3000))) throw new Error("redis did not start");
 */
export async function waitForLoopbackPort(port: number, timeoutMs: number, everyMs = 25): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      const sock = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      sock.end();
      return true;
    } catch {
      await Bun.sleep(everyMs);
    }
  }
  return false;
}
