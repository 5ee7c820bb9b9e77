/**
 * What the request handler asks to route: pick a healthy backend for a model
 * (skipping ids this request already tried) and hear about the request's
 * life (routed, first token, finished) so load- and prefix-aware routing can
 * count it. Not the routing core (`routing/router.ts`, pure): this is the
 * gateway's request-facing side over the worker pool. Two implementations:
 * `createBaselineRouter` here (the gateway core's stateless baselines,
 * round-robin and least-outstanding, over the pool's own outstanding counts)
 * and `createAwareRouter` in `aware-router.ts` (every policy of
 * `routing/create-policy.ts`, through the routing core, with KV-event and
 * load streams).
 *
 * @example
 * const router = createBaselineRouter(pool, createLeastOutstandingPolicy());
 * const pick = router.pick("qwen", routeReq, new Set());
 * router.routed(id, routeReq, pick.member.backend.id); ... router.finished(id);
 */
import type { RouteDecision, RouteRequest, RoutingPolicy } from "../routing/policy";
import type { BackendPool, Member } from "./pool";

export interface RequestRouter {
  readonly policy: RoutingPolicy;
  /** Whether requests need prompt block hashes (text blocks for backends without a known tokenizer). */
  readonly wantsPrefixes: boolean;
  /** The chosen member and why, or null when no healthy untried backend serves the model. */
  pick(model: string, req: RouteRequest, exclude: ReadonlySet<string>): { member: Member; decision: RouteDecision } | null;
  /** The request was sent to `backendId` (again on each retry elsewhere). */
  routed(requestId: string, req: RouteRequest, backendId: string): void;
  /** Its first output arrived (its prefill is done). */
  firstToken(requestId: string): void;
  /** Done, failed or cancelled: call once per routed request. */
  finished(requestId: string): void;
  /** Stop background work (streams, scrapes, shared state). */
  stop(): Promise<void>;
}

/** Choose among the pool's healthy candidates; one candidate needs no policy. */
export function pickFrom(pool: BackendPool, views: ReturnType<BackendPool["candidates"]>, choose: () => RouteDecision, policyName: string) {
  if (views.length === 0) return null;
  const decision = views.length === 1 ? { backendId: views[0]!.id, reason: "only" } : choose();
  const member = pool.get(decision.backendId);
  if (!member) throw new Error(`policy ${policyName} chose unknown backend ${decision.backendId}`);
  return { member, decision };
}

/** The request router for a stateless baseline policy (round-robin, least-outstanding). */
export function createBaselineRouter(pool: BackendPool, policy: RoutingPolicy, rand: () => number = Math.random): RequestRouter {
  return {
    policy,
    wantsPrefixes: false,
    pick(model, req, exclude) {
      const views = pool.candidates(model, exclude);
      return pickFrom(pool, views, () => policy.choose(req, views, rand), policy.name);
    },
    // The pool's outstanding counts (acquire/release) are all these policies read.
    routed() {},
    firstToken() {},
    finished() {},
    stop: async () => {},
  };
}
