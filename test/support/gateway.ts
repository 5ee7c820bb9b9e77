/**
 * A real gateway process (`gateway/src/main.ts`) on a loopback port in front
 * of the given backends, configured through its documented `DISPATCH_*`
 * variables. Fast health checks by default so ejection is quick to observe.
 *
 * @example
 * const gw = await startGateway({ backends: [ms.url], env: { DISPATCH_SERVER_MAX_IN_FLIGHT: "8" } });
 * const ready = await gw.readyz(); // { status, backends: [{ id, healthy, ... }] }
 */
import { freePort, waitFor } from "./ports";
import { type ManagedProcess, spawnManaged } from "./process";

export interface GatewayOptions {
  /** Dispatch model server base URLs (or `kind=url` entries). */
  backends: string[];
  /** Extra environment, e.g. DISPATCH_SERVER_MAX_IN_FLIGHT. Overrides the defaults below. */
  env?: Record<string, string>;
  /** Wait until this many backends are healthy (default: all). */
  waitHealthy?: number;
  readyTimeoutMs?: number;
}

export interface BackendState {
  id: string;
  kind: string;
  healthy: boolean;
  error: string | null;
}

export interface GatewayHandle {
  readonly url: string;
  readonly port: number;
  readonly process: ManagedProcess;
  readyz(): Promise<{ status: string; backends: BackendState[] }>;
  stop(): Promise<void>;
}

/** Defaults for tests: probes every 100 ms (300 ms timeout), eject after 2 failures, no request log lines. */
export const fastHealthEnv: Record<string, string> = {
  DISPATCH_HEALTH_INTERVAL_MS: "100",
  DISPATCH_HEALTH_TIMEOUT_MS: "300",
  DISPATCH_HEALTH_UNHEALTHY_AFTER: "2",
  DISPATCH_HEALTH_HEALTHY_AFTER: "1",
  DISPATCH_LOGGING_REQUESTS: "false",
};

export async function startGateway(o: GatewayOptions): Promise<GatewayHandle> {
  const port = freePort();
  const backends = o.backends.map((b) => (b.includes("=") ? b : `dispatch=${b}`)).join(",");
  const p = spawnManaged(`gateway:${port}`, [process.execPath, "gateway/src/main.ts"], {
    ...fastHealthEnv,
    DISPATCH_SERVER_HOST: "127.0.0.1",
    DISPATCH_SERVER_PORT: String(port),
    DISPATCH_BACKENDS: backends,
    ...o.env,
  });
  const url = `http://127.0.0.1:${port}`;
  const readyz = async () => (await (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) })).json()) as { status: string; backends: BackendState[] };
  try {
    await p.waitForOutput(/"msg":"listening"/, o.readyTimeoutMs ?? 20_000);
    const want = o.waitHealthy ?? o.backends.length;
    const ok = await waitFor(async () => (await readyz().catch(() => undefined))?.backends.filter((b) => b.healthy).length === want, o.readyTimeoutMs ?? 20_000, 50);
    if (!ok) throw new Error(`gateway never saw ${want} healthy backends:\n${p.output().slice(-3000)}`);
  } catch (err) {
    await p.kill();
    throw err;
  }
  return { url, port, process: p, readyz, stop: () => p.stop() };
}
