/**
 * SGLang's cache-aware rule (sgl-router `policies/cache_aware.rs`), re-stated
 * over our prefix index and load view.
 *
 * The rule:
 * 1. Load is `requestLoad` per backend (SGLang counts its own in-flight
 *    requests). The system is *imbalanced* when BOTH
 *      max - min > balanceAbsThreshold   and   max > balanceRelThreshold * min.
 *    Imbalanced: route to the least-loaded backend, ignoring the cache.
 * 2. Balanced: take the backend with the longest prefix match. If its match
 *    rate (matched tokens / prompt tokens) is above `cacheThreshold`, route
 *    there; otherwise route to the backend whose cache is smallest
 *    (`cachedBlocks`: the most room for a new prefix).
 *
 * Parameters and their defaults (SGLang's `CacheAwareConfig::default()`):
 * - cacheThreshold 0.5: the match rate above which the cache decides.
 * - balanceAbsThreshold 32 requests and balanceRelThreshold 1.1: both must be
 *   exceeded for the load to count as imbalanced.
 * (SGLang's launcher CLI has used other defaults, 0.3 / 64 / 1.5, in some
 * releases; the library's own defaults are what this mirrors.)
 *
 * Differences from SGLang, deliberately small: SGLang matches characters in an
 * approximate radix tree built from its own routing; here the match is in
 * blocks from whatever index the router keeps (exact KV events for dispatch's
 * servers), so every cache-aware policy sees the same information and only
 * the decision rule differs.
 *
 * @example
 * createCacheAwarePolicy().choose(req, backends, rand);
 */
import { argMin, decide, requestLoad } from "./load-score";
import type { RoutingPolicy } from "./policy";

export interface CacheAwareOptions {
  cacheThreshold?: number;
  balanceAbsThreshold?: number;
  balanceRelThreshold?: number;
}

export function createCacheAwarePolicy(options: CacheAwareOptions = {}): RoutingPolicy {
  const cacheThreshold = options.cacheThreshold ?? 0.5;
  const absThreshold = options.balanceAbsThreshold ?? 32;
  const relThreshold = options.balanceRelThreshold ?? 1.1;
  return {
    name: "sglang-cache-aware",
    choose(req, backends, rand) {
      const loads = backends.map(requestLoad);
      const max = Math.max(...loads);
      const min = Math.min(...loads);
      if (max - min > absThreshold && max > relThreshold * min) {
        return decide(backends[argMin(loads, rand)]!, "imbalanced");
      }
      const matched = backends.map((b) => b.matchedBlocks ?? 0);
      const best = argMin(matched.map((m) => -m), rand);
      const rate = req.promptTokens > 0 ? (matched[best]! * req.blockSize) / req.promptTokens : 0;
      if (rate > cacheThreshold) return decide(backends[best]!, "prefix");
      return decide(backends[argMin(backends.map((b) => b.cachedBlocks ?? 0), rand)]!, "smallest-cache");
    },
  };
}
