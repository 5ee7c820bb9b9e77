/**
 * Several gateway replicas in front of the same 8 servers: 1 replica, 4
 * replicas that share nothing, 4 replicas sharing routing updates through a
 * real Redis. Arrivals are spread over the replicas in turn (as an L4 load
 * balancer would). Each replica always receives every server's load reports
 * and, in exact mode, KV events; in approximate mode (foreign backends) its
 * prefix index is only what it routed, or what all replicas routed when shared.
 */
import { capacityPerMs } from "./capacity";
import { engineFor, SERVERS } from "./matrix";
import { summarize } from "./metrics";
import { createPolicy } from "@dispatch/gateway/src/routing/create-policy";
import { createRedisTransport } from "./redis-transport";
import { simulate, type SharedTransport } from "./simulate";
import type { Workload } from "./workload";

export interface ReplicaResult {
  workload: string;
  indexMode: "exact" | "approximate";
  setup: string;
  hitRate: number;
  ttftP99Ms: number;
  /** Hit rate relative to one replica in the same mode. */
  hitVsOne: number;
  redis?: { sent: number; received: number; publishFailed: number };
}

export async function runReplicaExperiment(
  redisUrl: string,
  workloads: Workload[],
  load: number,
  seed: number,
  log: (line: string) => void,
): Promise<ReplicaResult[]> {
  const out: ReplicaResult[] = [];
  let run = 0;
  for (const w of workloads) {
    const engine = engineFor(w);
    const rate = capacityPerMs(w, engine, SERVERS) * load;
    for (const indexMode of ["exact", "approximate"] as const) {
      let one = 0;
      const setups: Array<{ setup: string; replicas: number; share: "none" | "redis" }> = [
        { setup: "1 replica", replicas: 1, share: "none" },
        { setup: "4 replicas, unshared", replicas: 4, share: "none" },
        { setup: "4 replicas, Redis", replicas: 4, share: "redis" },
      ];
      for (const s of setups) {
        const transport = s.share === "redis" ? await createRedisTransport(redisUrl, s.replicas, `dispatch:bench:${process.pid}:${run++}`) : undefined;
        try {
          const r = await simulate({
            workload: w,
            engine,
            servers: SERVERS,
            ratePerMs: rate,
            seed,
            replicas: s.replicas,
            indexMode,
            share: transport ?? ("none" as const satisfies SharedTransport | "none"),
            policy: () => createPolicy("dispatch"),
          });
          const m = summarize(r);
          if (s.replicas === 1) one = m.hitRate;
          const stats = transport?.states.map((x) => x.stats());
          const res: ReplicaResult = {
            workload: w.name,
            indexMode,
            setup: s.setup,
            hitRate: m.hitRate,
            ttftP99Ms: m.ttftP99Ms,
            hitVsOne: one > 0 ? m.hitRate / one : Number.NaN,
            redis: stats && {
              sent: stats.reduce((a, x) => a + x.sent, 0),
              received: stats.reduce((a, x) => a + x.received, 0),
              publishFailed: stats.reduce((a, x) => a + x.publishFailed, 0),
            },
          };
          out.push(res);
          log(`${w.name.padEnd(15)} ${indexMode.padEnd(12)} ${s.setup.padEnd(22)} hit ${m.hitRate.toFixed(3)} (x${res.hitVsOne.toFixed(3)} of 1 replica)  p99 ${m.ttftP99Ms.toFixed(0)} ms`);
        } finally {
          await transport?.close();
        }
      }
    }
  }
  return out;
}
