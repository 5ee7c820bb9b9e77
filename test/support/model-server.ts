/**
 * A real model server process (`model-server/src/main.ts`) on a fixed loopback
 * port, so it can be killed and restarted at the same address the gateway
 * knows. Ready when it prints `[model-server] ready: ...`.
 *
 * @example
 * const ms = await startModelServer({ args: ["--kv-blocks", "64"] });
 * await ms.kill();      // crash
 * await ms.restart();   // same port
 * const used = (await scrapeMetrics(ms.url)).get("dispatch_ms_kv_blocks_used");
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "./ports";
import { type ManagedProcess, repoRoot, spawnManaged } from "./process";

/** The bundled model (model-server/models/<dir> with config.json); DISPATCH_TEST_MODEL overrides. */
export function bundledModel(): string {
  if (process.env.DISPATCH_TEST_MODEL) return process.env.DISPATCH_TEST_MODEL;
  const dir = join(repoRoot, "model-server", "models");
  const found = existsSync(dir) ? readdirSync(dir).find((d) => existsSync(join(dir, d, "config.json"))) : undefined;
  if (!found) throw new Error(`no model under ${dir}; set DISPATCH_TEST_MODEL`);
  return join(dir, found);
}

export interface ModelServerOptions {
  /** Extra flags, e.g. ["--kv-blocks", "64", "--max-queue", "4"]. */
  args?: string[];
  port?: number;
  name?: string;
  readyTimeoutMs?: number;
}

export interface ModelServerHandle {
  readonly url: string;
  readonly port: number;
  /** The current process (a new one after `restart`). */
  readonly process: ManagedProcess;
  kill(): Promise<void>;
  stop(): Promise<void>;
  /** Starts it again on the same port and waits until ready. */
  restart(): Promise<void>;
}

export async function startModelServer(o: ModelServerOptions = {}): Promise<ModelServerHandle> {
  const port = o.port ?? freePort();
  const name = o.name ?? `model-server:${port}`;
  const launch = async () => {
    const p = spawnManaged(name, [process.execPath, "model-server/src/main.ts", "--model", bundledModel(), "--host", "127.0.0.1", "--port", String(port), ...(o.args ?? [])]);
    try {
      await p.waitForOutput(/\[model-server\] ready: /, o.readyTimeoutMs ?? 30_000);
    } catch (err) {
      await p.kill();
      throw err;
    }
    return p;
  };
  let current = await launch();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get process() {
      return current;
    },
    kill: () => current.kill(),
    stop: () => current.stop(),
    async restart() {
      if (current.alive()) await current.kill();
      current = await launch();
    },
  };
}
