/**
 * Routing policies by their config name (`routing.policy`). New policies
 * (prefix- and load-aware ones) register here.
 *
 * @example
 * const policy = createPolicy("round-robin");
 */
import { ConfigError } from "../config/schema";
import { createLeastOutstandingPolicy } from "../routing/least-outstanding";
import type { RoutingPolicy } from "../routing/policy";
import { createRoundRobinPolicy } from "../routing/round-robin";

export const POLICIES: Record<string, () => RoutingPolicy> = {
  "round-robin": createRoundRobinPolicy,
  "least-outstanding": createLeastOutstandingPolicy,
};

export function createPolicy(name: string): RoutingPolicy {
  const make = POLICIES[name];
  if (!make) throw new ConfigError(`config.routing.policy '${name}' is not a known policy (known: ${Object.keys(POLICIES).join(", ")})`);
  return make();
}
