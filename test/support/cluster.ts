/**
 * N real model servers (optionally each behind a fault proxy) and one gateway
 * in front of them, all on loopback; `stop()` ends every process it started.
 *
 * @example
 * const c = await startCluster({ servers: 4 });
 * await c.servers[0].kill();
 * await c.stop();
 */
import { createFaultProxy, type FaultProxy } from "./fault-proxy";
import { type GatewayHandle, startGateway } from "./gateway";
import { type ModelServerHandle, startModelServer } from "./model-server";

export interface ClusterOptions {
  servers: number;
  /** Flags for every model server. */
  serverArgs?: string[];
  /** Put a fault proxy in front of each server (the gateway talks to the proxies). */
  proxies?: boolean;
  gatewayEnv?: Record<string, string>;
  /** A bearer key for the gateway's own calls here (GET /v1/models) when it requires one. */
  apiKey?: string;
}

export interface Cluster {
  readonly gateway: GatewayHandle;
  readonly servers: ModelServerHandle[];
  readonly proxies: FaultProxy[];
  /** The model id the servers serve. */
  readonly model: string;
  stop(): Promise<void>;
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const servers: ModelServerHandle[] = [];
  const proxies: FaultProxy[] = [];
  let gateway: GatewayHandle | undefined;
  const stop = async () => {
    await gateway?.stop();
    for (const p of proxies) p.stop();
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    // Fault scenarios need traffic on every server: the default prefix-aware policy keeps a
    // shared-prefix workload on the one server that holds the prefix, so pin a spreading one
    // (DISPATCH_ROUTING_POLICY in the environment runs the scenarios under another).
    servers.push(...(await Promise.all(Array.from({ length: o.servers }, () => startModelServer({ args: o.serverArgs })))));
    if (o.proxies) proxies.push(...servers.map((s) => createFaultProxy(s.url)));
    gateway = await startGateway({ backends: o.proxies ? proxies.map((p) => p.url) : servers.map((s) => s.url), env: { DISPATCH_ROUTING_POLICY: process.env.DISPATCH_ROUTING_POLICY || "least-outstanding", ...o.gatewayEnv } });
    const res = await fetch(`${gateway.url}/v1/models`, { headers: o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {} });
    const models = (await res.json()) as { data?: { id: string }[] };
    const model = models.data?.[0]?.id;
    if (!model) throw new Error(`the gateway lists no model: ${res.status} ${JSON.stringify(models)}`);
    return { gateway, servers, proxies, model, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
