/**
 * Routing policies by their config name (`routing.policy`). The gateway
 * core's two baselines, round-robin and least-outstanding, need nothing but
 * the pool's outstanding counts and route through `createBaselineRouter`
 * (`request-router.ts`); every other name is a policy of `routing/create-policy.ts` and routes through
 * `aware-router.ts` (prefix index, load streams, shared state).
 *
 * @example
 * checkPolicyName("dispatch"); // throws ConfigError for an unknown name
 * const policy = createPolicy("round-robin");
 */
import { ConfigError } from "../config/schema";
import { POLICY_NAMES } from "../routing/create-policy";
import { createLeastOutstandingPolicy } from "../routing/least-outstanding";
import type { RoutingPolicy } from "../routing/policy";
import { createRoundRobinPolicy } from "../routing/round-robin";

/** The stateless baselines (no prefix index, no load streams). */
export const POLICIES: Record<string, () => RoutingPolicy> = {
  "round-robin": createRoundRobinPolicy,
  "least-outstanding": createLeastOutstandingPolicy,
};

/** Every name `routing.policy` accepts. */
export const ALL_POLICY_NAMES: readonly string[] = [...POLICY_NAMES, ...Object.keys(POLICIES)];

export function isBaselinePolicy(name: string): boolean {
  return name in POLICIES;
}

export function checkPolicyName(name: string): void {
  if (!ALL_POLICY_NAMES.includes(name)) {
    throw new ConfigError(`config.routing.policy '${name}' is not a known policy (known: ${ALL_POLICY_NAMES.join(", ")})`);
  }
}

/** A baseline policy object (round-robin, least-outstanding). */
export function createPolicy(name: string): RoutingPolicy {
  checkPolicyName(name);
  const make = POLICIES[name];
  if (!make) throw new ConfigError(`config.routing.policy '${name}' needs the aware router (workers/aware-router.ts)`);
  return make();
}
