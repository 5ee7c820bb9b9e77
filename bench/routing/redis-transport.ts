/**
 * The simulator's replica transport over a REAL Redis, through the gateway's
 * own shared-state module (gateway/src/state/redis-shared-state.ts). Virtual
 * time stands still while updates travel, so `settle()` waits (bounded) until
 * every replica has received every update the others sent: the run stays
 * deterministic and measures what sharing is worth, not loopback latency.
 */
import { createRedisSharedState, type SharedState } from "@dispatch/gateway/src/state/redis-shared-state";
import type { SharedTransport } from "./simulate";

export interface RedisTransport extends SharedTransport {
  states: SharedState[];
  close(): Promise<void>;
}

export async function createRedisTransport(url: string, replicas: number, channel: string): Promise<RedisTransport> {
  const states = Array.from({ length: replicas }, (_, i) =>
    createRedisSharedState({ url, replicaId: `replica-${i}`, channel, deadlineMs: 50 }),
  );
  const ok = await Promise.all(states.map((s) => s.ready(3000)));
  if (!ok.every(Boolean)) throw new Error(`could not subscribe to Redis at ${url}`);
  return {
    states,
    attach(i, apply) {
      states[i]!.onRemote(apply);
      return (u) => states[i]!.publish(u);
    },
    async settle() {
      const deadline = Date.now() + 5000;
      for (let spin = 0; ; spin++) {
        const stats = states.map((s) => s.stats());
        const sent = stats.reduce((a, s) => a + s.sent, 0);
        if (stats.every((s, j) => s.received >= sent - s.sent)) return;
        if (Date.now() > deadline) throw new Error("Redis delivery stalled for 5 s");
        await (spin < 200 ? new Promise((r) => setImmediate(r)) : Bun.sleep(1));
      }
    },
    async close() {
      await Promise.all(states.map((s) => s.close()));
    },
  };
}
