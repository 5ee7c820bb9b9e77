/**
 * Starts the real model server as a subprocess on a free loopback port and
 * waits for its ready line; finds the bundled model. For end-to-end tests and
 * benchmarks.
 *
 * @example
 * const s = await startServer({ model: bundledModelDir(), args: ["--kv-blocks", "256"] });
 * // ... s.url ...
 * await s.stop();
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";

const root = join(import.meta.dir, "..", "..");

/** The bundled model directory (model-server/models/<dir> with a config.json); DISPATCH_TEST_MODEL overrides. */
export function bundledModelDir(): string {
  const fromEnv = process.env.DISPATCH_TEST_MODEL;
  if (fromEnv) return fromEnv;
  const dir = join(root, "model-server", "models");
  const found = existsSync(dir) ? readdirSync(dir).find((d) => existsSync(join(dir, d, "config.json"))) : undefined;
  if (!found) throw new Error(`no bundled model under ${dir} (a directory with config.json); set DISPATCH_TEST_MODEL`);
  return join(dir, found);
}

export interface RunningServer {
  url: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Everything the server wrote so far (stdout and stderr). */
  output(): string;
  stop(): Promise<number>;
}

export async function startServer(opts: { model: string; args?: string[]; timeoutMs?: number }): Promise<RunningServer> {
  const proc = Bun.spawn([process.execPath, join(root, "model-server/src/main.ts"), "--model", opts.model, "--host", "127.0.0.1", "--port", "0", ...(opts.args ?? [])], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const d = new TextDecoder();
    for await (const chunk of s) out += d.decode(chunk, { stream: true });
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  while (Date.now() < deadline) {
    const m = out.match(/\[model-server\] ready: serving ".*" at (http:\/\/\S+)/);
    if (m) {
      return {
        url: m[1]!,
        proc,
        output: () => out,
        async stop() {
          proc.kill("SIGTERM");
          const killer = setTimeout(() => proc.kill("SIGKILL"), 5000);
          const code = await proc.exited;
          clearTimeout(killer);
          return code;
        },
      };
    }
    if (proc.exitCode !== null) break;
    await Bun.sleep(20);
  }
  proc.kill("SIGKILL");
  await proc.exited;
  throw new Error(`model server did not become ready:\n${out}`);
}
