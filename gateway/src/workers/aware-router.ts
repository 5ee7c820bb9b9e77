/**
 * Prefix- and load-aware routing in the running gateway: the routing
 * engineer's router (`routing/router.ts`) fed by the pool and the backends.
 * - Backends join the router when they turn healthy and leave when ejected or
 *   removed: dispatch model servers as "exact" (their `WatchKvEvents` feed
 *   the index; `WatchLoad` the load), OpenAI-HTTP servers as "approximate"
 *   (what was routed there; load from their `/metrics`). See backend-streams.ts.
 * - With shared state (Redis), every routed/first-token/finished update is
 *   published and the other replicas' updates applied, so approximate
 *   indexes, in-flight load and session affinity cover the whole fleet.
 *
 * @example
 * const router = createAwareRouter({ pool, policy: "dispatch", log, shared });
 * const pick = router.pick(model, routeReq, tried);
 * router.routed(job.id, routeReq, pick.member.backend.id);
 */
import type { Logger } from "../log/logger";
import { createRouter as createRoutingCore, type Router as RoutingCore } from "../routing/router";
import type { SharedState } from "../state/redis-shared-state";
import { type BackendFeeds, startBackendFeeds } from "./backend-streams";
import { POLICIES as BASELINES } from "./policies";
import type { BackendPool } from "./pool";
import type { DispatchCostOptions } from "../routing/dispatch-cost";
import { pickFrom, type RequestRouter } from "./request-router";

export interface AwareRouterOptions {
  pool: BackendPool;
  /** A name from `routing/create-policy.ts` (round-robin and least-outstanding work too). */
  policy: string;
  log: Logger;
  /** Redis-shared routing state across replicas; absent: this replica's view only. */
  shared?: SharedState;
  rand?: () => number;
  /** The dispatch policy's tunables (config routing.affinity_slack_ms). */
  dispatch?: DispatchCostOptions;
  /** Feed tuning (tests). */
  feeds?: { loadIntervalMs?: number; backoffMs?: number; maxBackoffMs?: number; scrapeIntervalMs?: number };
}

export interface AwareRouter extends RequestRouter {
  /** The routing core (index, load tracker), for tests and debugging. */
  readonly core: RoutingCore;
  readonly shared?: SharedState;
}

export function createAwareRouter(o: AwareRouterOptions): AwareRouter {
  const { pool, log, shared } = o;
  // blockSize here only seeds validation: every request carries its own (the model's, or the text blocks').
  const core = createRoutingCore({
    policy: o.policy,
    blockSize: 16,
    rand: o.rand,
    dispatch: o.dispatch,
    extra: BASELINES,
    onUpdate: shared && ((u) => shared.publish(u)),
  });
  shared?.onRemote((u) => core.applyRemote(u));
  const feeds = new Map<string, BackendFeeds>();
  /** Requests routed and not yet finished, so `finished` reaches the core once. */
  const open = new Set<string>();

  function join(id: string): void {
    const m = pool.get(id);
    if (!m || feeds.has(id)) return;
    core.addBackend(id, m.backend.kind === "dispatch" ? "exact" : "approximate");
    feeds.set(
      id,
      startBackendFeeds({ backend: m.backend, router: core, log, onStreamError: (err) => pool.reportFailure(id, `load stream: ${err.message}`), ...o.feeds }),
    );
  }
  function leave(id: string): void {
    feeds.get(id)?.stop();
    feeds.delete(id);
    core.removeBackend(id);
  }
  pool.onChange((m) => (m.healthy ? join(m.backend.id) : leave(m.backend.id)));
  for (const m of pool.members) if (m.healthy) join(m.backend.id);

  return {
    core,
    shared,
    policy: core.policy,
    wantsPrefixes: true,
    pick(model, req, exclude) {
      const views = pool.candidates(model, exclude);
      return pickFrom(pool, views, () => core.choose(req, views.map((v) => v.id)), core.policy.name);
    },
    routed(requestId, req, backendId) {
      open.add(requestId);
      core.onRouted(requestId, req, backendId);
    },
    firstToken(requestId) {
      if (open.has(requestId)) core.onFirstToken(requestId);
    },
    finished(requestId) {
      if (open.delete(requestId)) core.onFinished(requestId);
    },
    async stop() {
      for (const id of [...feeds.keys()]) feeds.get(id)!.stop();
      feeds.clear();
      await shared?.close();
    },
  };
}
