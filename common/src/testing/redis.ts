/**
 * A real redis-server on loopback for tests, started once per test process on a
 * free port and stopped when the process exits. `.ci/run` and `npm test`
 * install redis-server from Debian; without it, tests that need Redis fail
 * with this message rather than skip.
 */
import { spawn, type Subprocess } from "bun";

let started: Promise<{ url: string; port: number; proc: Subprocess }> | undefined;

export function testRedis(): Promise<{ url: string; port: number; proc: Subprocess }> {
  started ??= start();
  return started;
}

async function start() {
  if (!Bun.which("redis-server")) throw new Error("redis-server is not installed (apt-get install redis-server)");
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    // setpriv --pdeathsig: the kernel kills redis-server when this test process
    // ends, however it ends (bun test does not always run "exit" handlers).
    const argv = ["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
    const proc = spawn(Bun.which("setpriv") ? ["setpriv", "--pdeathsig", "KILL", "--", ...argv] : argv, {
      stdout: "ignore",
      stderr: "ignore",
    });
    process.once("exit", () => proc.kill());
    if (await waitForPort(port, 3000)) return { url: `redis://127.0.0.1:${port}`, port, proc };
    proc.kill();
  }
  throw new Error("could not start redis-server on loopback");
}

async function waitForPort(port: number, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      const sock = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      sock.end();
      return true;
    } catch {
      await Bun.sleep(25);
    }
  }
  return false;
}
