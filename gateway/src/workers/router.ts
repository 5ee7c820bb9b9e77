/**
 * Glue between the pool and a pure routing policy: build the candidate
 * views, ask the policy, return the chosen member. Excluded ids (backends
 * already tried by this request) are skipped.
 *
 * @example
 * const router = createRouter(pool, createLeastOutstandingPolicy());
 * const member = router.pick("qwen", routeReq, new Set());
 */
import type { RouteDecision, RouteRequest, RoutingPolicy } from "../routing/policy";
import type { BackendPool, Member } from "./pool";

export interface Router {
  readonly policy: RoutingPolicy;
  /** The chosen member and why, or null when no healthy untried backend serves the model. */
  pick(model: string, req: RouteRequest, exclude: ReadonlySet<string>): { member: Member; decision: RouteDecision } | null;
}

export function createRouter(pool: BackendPool, policy: RoutingPolicy, rand: () => number = Math.random): Router {
  return {
    policy,
    pick(model, req, exclude) {
      const views = pool.candidates(model, exclude);
      if (views.length === 0) return null;
      const decision = views.length === 1 ? { backendId: views[0]!.id, reason: "only" } : policy.choose(req, views, rand);
      const member = pool.get(decision.backendId);
      if (!member) throw new Error(`policy ${policy.name} chose unknown backend ${decision.backendId}`);
      return { member, decision };
    },
  };
}
