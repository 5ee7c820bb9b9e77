/**
 * Every policy by name, for configuration and the simulator. Round-robin and
 * least-outstanding live beside this file too (the gateway core's baselines);
 * the registry takes them through `extra` so this file does not depend on them.
 *
 * @example
 * const p = createPolicy("dispatch", { dispatch: { prefillTokensPerS: 20_000 } });
 */
import { createCacheAwarePolicy, type CacheAwareOptions } from "./cache-aware";
import { createConsistentHashPolicy, type ConsistentHashOptions } from "./consistent-hash";
import { createDispatchCostPolicy, type DispatchCostOptions } from "./dispatch-cost";
import { createLeastLoadPolicy } from "./least-load";
import type { RoutingPolicy } from "./policy";
import { createPowerOfTwoPolicy } from "./power-of-two";
import { createWeightedScorersPolicy, type ScorerWeights } from "./weighted-scorers";

export const POLICY_NAMES = [
  "dispatch",
  "least-load",
  "power-of-two",
  "consistent-hash",
  "sglang-cache-aware",
  "llm-d-weighted",
] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export interface PolicyOptions {
  dispatch?: DispatchCostOptions;
  consistentHash?: ConsistentHashOptions;
  cacheAware?: CacheAwareOptions;
  weights?: ScorerWeights;
  /** Other policies by name (e.g. the gateway's round-robin), created on demand. */
  extra?: Record<string, () => RoutingPolicy>;
}

export function createPolicy(name: string, options: PolicyOptions = {}): RoutingPolicy {
  switch (name) {
    case "dispatch":
      return createDispatchCostPolicy(options.dispatch);
    case "least-load":
      return createLeastLoadPolicy();
    case "power-of-two":
      return createPowerOfTwoPolicy();
    case "consistent-hash":
      return createConsistentHashPolicy(options.consistentHash);
    case "sglang-cache-aware":
      return createCacheAwarePolicy(options.cacheAware);
    case "llm-d-weighted":
      return createWeightedScorersPolicy(options.weights);
  }
  const extra = options.extra?.[name];
  if (extra) return extra();
  const known = [...POLICY_NAMES, ...Object.keys(options.extra ?? {})].join(", ");
  throw new RangeError(`unknown routing policy "${name}" (known: ${known})`);
}
