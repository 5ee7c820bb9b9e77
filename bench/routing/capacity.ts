/**
 * Cluster capacity for a workload, so "80% load" means the same thing for
 * every policy: the request rate at which the servers would be busy all the
 * time if the cluster's whole KV cache (servers x per-server blocks) were one
 * LRU cache shared perfectly: each request reuses the longest prefix that
 * cache holds, as if routing were perfect and free. Decode runs at a nominal
 * batch of 32. Per request:
 *   demand = uncachedTokens * prefillMsPerToken + outputTokens * (stepPerSeqMs + stepBaseMs / 32)
 *   capacity = servers / mean(demand)
 * Real servers split the cache and the work, so a policy's true utilisation
 * at "95%" can exceed 100%: the regime where routing decides whether queues explode.
 */
import type { EngineConfig } from "./sim-server";
import type { Workload } from "./workload";

export const NOMINAL_BATCH = 32;

export interface PooledReuse {
  /** Uncached prompt tokens per request under the pooled cache. */
  uncached: number[];
  /** Token-weighted hit rate of the pooled cache: a ceiling for routing. */
  hitRate: number;
}

export function pooledReuse(w: Workload, blockSize: number, cacheBlocks: number): PooledReuse {
  const lru = new Map<bigint, true>();
  let hit = 0;
  let total = 0;
  const uncached = w.requests.map((r) => {
    let n = 0;
    while (n < r.promptHashes.length && lru.has(r.promptHashes[n]!)) n++;
    for (const h of r.seqHashes) {
      lru.delete(h);
      lru.set(h, true);
    }
    let excess = lru.size - cacheBlocks;
    for (const k of lru.keys()) {
      if (excess-- <= 0) break;
      lru.delete(k);
    }
    hit += n * blockSize;
    total += r.promptTokens;
    return r.promptTokens - n * blockSize;
  });
  return { uncached, hitRate: total > 0 ? hit / total : 0 };
}

/** Requests per ms the cluster sustains at 100% load. */
export function capacityPerMs(w: Workload, e: EngineConfig, servers: number): number {
  const { uncached } = pooledReuse(w, e.blockSize, servers * e.kvBlocks);
  let sum = 0;
  w.requests.forEach((r, i) => {
    sum += uncached[i]! * e.prefillMsPerToken + r.outputTokens * (e.stepPerSeqMs + e.stepBaseMs / NOMINAL_BATCH);
  });
  return servers / (sum / w.requests.length);
}
