/**
 * Starting and stopping the benchmark's processes: the fake upstream,
 * dispatch's gateway and the Portkey gateway, each a separate Bun process on
 * a free loopback port, killed by pid at the end.
 */
import { type Subprocess, spawn } from "bun";
import { createServer } from "node:net";

export const ROOT = new URL("../../", import.meta.url).pathname;
export const BUN = process.execPath;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Proc {
  name: string;
  port: number;
  proc: Subprocess;
}

export function start(name: string, argv: string[], port: number, env: Record<string, string> = {}): Proc {
  const proc = spawn([BUN, ...argv], { cwd: ROOT, env: { ...process.env, ...env }, stdout: "ignore", stderr: "pipe" });
  return { name, port, proc };
}

/** Poll until `probe` answers 2xx, or fail after `timeoutMs` with the process's stderr. */
export async function waitReady(p: Proc, probe: () => Promise<Response>, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (p.proc.exitCode !== null) break;
    try {
      const r = await probe();
      if (r.ok) {
        await r.arrayBuffer();
        return;
      }
    } catch {
      // not up yet
    }
    await Bun.sleep(100);
  }
  p.proc.kill();
  const err = await new Response(p.proc.stderr as ReadableStream).text();
  throw new Error(`${p.name} did not become ready on port ${p.port}: ${err.slice(-2000)}`);
}

export function stopAll(procs: Proc[]): void {
  for (const p of procs) if (p.proc.exitCode === null) p.proc.kill("SIGTERM");
}

export type Child = ReturnType<typeof Bun.spawn>;

/**
 * The child processes of one benchmark script: `spawn` starts `bun ARGV` from the repository
 * root (stdout dropped, stderr shown) and keeps it; `stop` SIGKILLs every one still running.
 *
 * @example
 * const { spawn, stop } = createChildren();
 * process.on("SIGINT", () => (stop(), process.exit(130)));
 * const server = spawn(["bench/gateway/instant-server.ts", "--port", String(port)]);
 */
export function createChildren(): { spawn: (argv: string[], env?: Record<string, string>) => Child; stop: () => void } {
  const procs: Child[] = [];
  return {
    spawn(argv, env = {}) {
      const p = Bun.spawn([BUN, ...argv], { cwd: ROOT, env: { ...process.env, ...env }, stdout: "ignore", stderr: "inherit" });
      procs.push(p);
      return p;
    },
    stop() {
      for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
    },
  };
}
