/**
 * A child process under test: spawned with Bun, its stdout and stderr kept in
 * memory (bounded), killed when the test process exits so nothing outlives a
 * run. The one place the harness spawns anything.
 *
 * @example
 * const p = spawnManaged("model-server", [process.execPath, "model-server/src/main.ts", ...]);
 * await p.waitForOutput(/ready: serving/, 10_000);
 * await p.stop();
 */
import type { Subprocess } from "bun";
import { join } from "node:path";

/** The repository root (test/support -> ../..). */
export const repoRoot = join(import.meta.dir, "..", "..");

const OUTPUT_LIMIT = 256 * 1024;
const live = new Set<Subprocess>();
let exitHookInstalled = false;

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly proc: Subprocess<"ignore", "pipe", "pipe">;
  /** The last 256 KiB of stdout and stderr together. */
  output(): string;
  alive(): boolean;
  /** Resolves with the first match of `pattern` in the output, or throws after `timeoutMs` or an exit. */
  waitForOutput(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  /** SIGKILL: the crash case. Resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

export function spawnManaged(name: string, argv: string[], env: Record<string, string | undefined> = {}): ManagedProcess {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", () => {
      for (const p of live) p.kill("SIGKILL");
    });
  }
  const proc = Bun.spawn(argv, { cwd: repoRoot, env: { ...process.env, ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  live.add(proc);
  void proc.exited.then(() => live.delete(proc));
  let out = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const d = new TextDecoder();
    for await (const chunk of s) {
      out += d.decode(chunk, { stream: true });
      if (out.length > OUTPUT_LIMIT) out = out.slice(-OUTPUT_LIMIT / 2);
    }
  };
  void pump(proc.stdout).catch(() => {});
  void pump(proc.stderr).catch(() => {});
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  return {
    name,
    pid: proc.pid,
    proc,
    output: () => out,
    alive,
    async waitForOutput(pattern, timeoutMs) {
      const until = Date.now() + timeoutMs;
      while (Date.now() < until) {
        const m = out.match(pattern);
        if (m) return m;
        if (!alive()) break;
        await Bun.sleep(10);
      }
      throw new Error(`${name} (pid ${proc.pid}) never printed ${pattern}${alive() ? " in time" : ` (exited ${proc.exitCode ?? proc.signalCode})`}:\n${out.slice(-4000)}`);
    },
    async kill() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
    async stop(graceMs = 3000) {
      if (!alive()) return;
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), graceMs);
      await proc.exited;
      clearTimeout(t);
    },
  };
}
