/**
 * The oracle: a policy that reads the simulated servers directly, so it knows
 * every cache exactly and every queue as it is now (no report delay), and
 * picks the server with the least time to first token under the simulator's
 * own engine model:
 *   W = queued prefill tokens + uncached prompt tokens
 *   TTFT = W * prefillMsPerToken + ceil(W / chunkTokens) * (stepBaseMs + stepPerSeqMs * running)
 * It is greedy (it does not plan for requests still to come), which is what
 * makes it a reference rather than an upper bound on everything.
 */
import type { RoutingPolicy } from "@dispatch/gateway/src/routing/policy";
import { argMin } from "@dispatch/gateway/src/routing/load-score";
import type { SimServer } from "./sim-server";

export function createOraclePolicy(servers: ReadonlyMap<string, SimServer>): RoutingPolicy {
  return {
    name: "oracle",
    choose(req, backends, rand) {
      const costs = backends.map((b) => {
        const s = servers.get(b.id)!;
        const c = s.cfg;
        const matched = s.cachedPrefix(req.blockHashes);
        const work = s.queuedPrefillTokens() + Math.max(1, req.promptTokens - matched * req.blockSize);
        return work * c.prefillMsPerToken + Math.ceil(work / c.chunkTokens) * s.stepMs();
      });
      const i = argMin(costs, rand);
      return { backendId: backends[i]!.id, reason: "oracle", matchedBlocks: servers.get(backends[i]!.id)!.cachedPrefix(req.blockHashes) };
    },
  };
}
