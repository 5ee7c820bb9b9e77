/**
 * The router: the one object the gateway's worker pool talks to. It owns the
 * prefix index, the load tracker and the affinity table, builds a
 * `BackendView` per candidate and asks the policy. Everything here is
 * synchronous bookkeeping; I/O (RPC streams, metrics scrapes, Redis) stays at
 * the edges and calls in.
 *
 * Wiring (the worker pool):
 *   const router = createRouter({ policy: "dispatch", blockSize: info.blockSize });
 *   router.addBackend(id, "exact");                     // our model server
 *   router.addBackend(url, "approximate");              // a vLLM / SGLang server
 *   router.onKvStreamStart(id, true);                   // before each WatchKvEvents({snapshot:true})
 *   router.onKvEvents(id, batch).resubscribe            // per KvEventBatch; true: resubscribe with snapshot
 *   router.onLoad(id, report);                          // per LoadReport (or scraped metrics)
 *   const d = router.choose(req, healthyIds);           // per request
 *   router.onRouted(requestId, req, d.backendId);       // when the RPC is sent
 *   router.onFirstToken(requestId);                     // first token received
 *   router.onFinished(requestId);                       // done, failed or cancelled
 *
 * @example
 * const router = createRouter({ policy: "dispatch", blockSize: 16 });
 * router.addBackend("a", "exact");
 * const d = router.choose({ blockHashes, promptTokens: 100, blockSize: 16 });
 */
import { createAffinityTable, type AffinityTable } from "./affinity-table";
import { createPolicy, type PolicyOptions } from "./create-policy";
import { applyKvBatch, type KvEventBatchLike, type KvStreamState } from "./kv-events";
import { createLoadTracker, type LoadSnapshot, type LoadTrackerOptions } from "./load-tracker";
import type { BackendView, RouteDecision, RouteRequest, RoutingPolicy } from "./policy";
import { createPrefixIndex, type IndexMode, type PrefixIndex, type PrefixIndexOptions } from "./prefix-index";
import { createPrefixPopularity, type PrefixPopularityOptions } from "./prefix-popularity";

/** A change one gateway replica tells the others (see gateway/src/state). */
export type RoutingUpdate =
  | {
      kind: "routed";
      requestId: string;
      backendId: string;
      blockHashes: readonly bigint[];
      prefillTokens: number;
      affinityKey?: string;
    }
  | { kind: "first-token"; requestId: string }
  | { kind: "finished"; requestId: string };

export interface RouterOptions extends PolicyOptions {
  /** A policy name (see `POLICY_NAMES`) or a policy object. */
  policy: string | RoutingPolicy;
  /** The model servers' KV block size in tokens (ModelInfo.block_size). */
  blockSize: number;
  index?: PrefixIndexOptions;
  load?: LoadTrackerOptions;
  popularity?: PrefixPopularityOptions;
  /** Keys remembered for session affinity. Default 100,000. */
  affinityCapacity?: number;
  /** Randomness for tie-breaks; seed it in tests. Default Math.random. */
  rand?: () => number;
  /** Clock in ms. Default Date.now. */
  now?: () => number;
  /** Called with every local change, for sharing with other replicas. */
  onUpdate?: (update: RoutingUpdate) => void;
  /** Expired index and in-flight entries are pruned this often. Default 5 s. */
  pruneIntervalMs?: number;
  /**
   * Pending index entries (`index.pendingTtlMs`; default 10 s under the
   * dispatch policy, off under every other) are ignored on the leading
   * blocks that are *hot*: requested more than `pendingHotShare` backends'
   * fair share of the fleet's traffic plus `pendingHotMargin` requests
   * (decayed counts over the popularity window):
   *   rate(block) > pendingHotShare * totalRate / backends + pendingHotMargin * unitRate
   * A hot prefix will be replicated anyway, so a burst on it should spread
   * rather than follow its first, unconfirmed copy; a cold one (a group's
   * prompt) should be followed. The margin keeps a prefix seen once, among
   * other traffic, from counting as hot on its own; a prefix that has been
   * the only traffic so far (a system prompt at start-up) is hot.
   * Defaults 1 and 0.75 (measured, docs/routing.md).
   */
  pendingHotShare?: number;
  pendingHotMargin?: number;
}

/** Pending-entry lifetime under the dispatch policy (see `pendingHotShare`). */
export const DISPATCH_PENDING_TTL_MS = 10_000;

export interface Router {
  readonly policy: RoutingPolicy;
  readonly index: PrefixIndex;
  addBackend(id: string, mode: IndexMode): void;
  removeBackend(id: string): void;
  backendIds(): string[];
  /** A (re)subscription to the backend's KV events starts; with a snapshot, its index is replaced. */
  onKvStreamStart(backendId: string, snapshot: boolean): void;
  onKvEvents(backendId: string, batch: KvEventBatchLike): { resubscribe: boolean };
  onLoad(backendId: string, report: LoadSnapshot): void;
  /** Pick a backend among `candidates` (default: every backend added). Throws NoBackendError when none. */
  choose(req: RouteRequest, candidates?: readonly string[]): RouteDecision;
  /** Views the policy would see, for logs and tests. */
  views(req: RouteRequest, candidates?: readonly string[]): BackendView[];
  onRouted(requestId: string, req: RouteRequest, backendId: string): void;
  onFirstToken(requestId: string): void;
  onFinished(requestId: string): void;
  /** Apply another replica's update (never re-published). */
  applyRemote(update: RoutingUpdate): void;
}

export class NoBackendError extends Error {
  readonly code = "no_backend";
  constructor() {
    super("no healthy backend to route to");
  }
}

export function createRouter(options: RouterOptions): Router {
  if (!Number.isInteger(options.blockSize) || options.blockSize <= 0) {
    throw new RangeError(`blockSize must be a positive integer, got ${options.blockSize}`);
  }
  const policy = typeof options.policy === "string" ? createPolicy(options.policy, options) : options.policy;
  // dispatch's cost model counts pending entries; the baselines keep the index their designs describe.
  const pendingTtlMs = options.index?.pendingTtlMs ?? (policy.name === "dispatch" ? DISPATCH_PENDING_TTL_MS : 0);
  const index = createPrefixIndex({ ...options.index, pendingTtlMs });
  const loads = createLoadTracker(options.load);
  const affinity: AffinityTable = createAffinityTable(options.affinityCapacity);
  const popularity = createPrefixPopularity(options.popularity);
  const rand = options.rand ?? Math.random;
  const now = options.now ?? Date.now;
  const pruneEvery = options.pruneIntervalMs ?? 5000;
  const pendingOn = pendingTtlMs > 0;
  const hotShare = options.pendingHotShare ?? 1;
  const hotMargin = options.pendingHotMargin ?? 0.75;
  if (!(hotShare > 0) || !(hotMargin >= 0)) throw new RangeError("pendingHotShare must be > 0 and pendingHotMargin >= 0");
  const backends = new Set<string>();
  const streams = new Map<string, KvStreamState>();
  let lastPrune = Number.NEGATIVE_INFINITY;

  /**
   * Leading blocks too hot for pending entries: a prefix carrying more than
   * one backend's share of the traffic will be replicated anyway, so a burst
   * on it should spread, not follow its first (unconfirmed) copy.
   */
  function hotDepth(hashes: readonly bigint[], t: number): number {
    if (!pendingOn) return 0;
    const limit = (hotShare * popularity.totalRate(t)) / Math.max(1, backends.size) + hotMargin * popularity.unitRate;
    let n = 0;
    while (n < hashes.length && popularity.rate(hashes[n]!, t) > limit) n++;
    return n;
  }

  function views(req: RouteRequest, candidates?: readonly string[]): BackendView[] {
    const ids = candidates ?? [...backends];
    const t = now();
    if (t - lastPrune >= pruneEvery) {
      index.prune(t);
      loads.prune(t);
      lastPrune = t;
    }
    const matched = index.match(req.blockHashes, ids, t, hotDepth(req.blockHashes, t));
    const deepest = Math.max(0, ...matched);
    const affine = req.affinityKey ? affinity.get(req.affinityKey) : undefined;
    return ids.map((id, i) => {
      const l = loads.view(id);
      const m = matched[i]!;
      return {
        id,
        outstanding: l.outstanding,
        load: l.load,
        matchedBlocks: matched[i],
        pendingPrefillTokens: l.pendingPrefillTokens,
        pendingRequests: l.pendingRequests,
        cachedBlocks: index.size(id),
        missedPrefixRate: m < deepest ? popularity.rate(req.blockHashes[m]!, t) : 0,
        affine: affine === id,
      };
    });
  }

  function routed(u: Extract<RoutingUpdate, { kind: "routed" }>): void {
    index.recordRouted(u.backendId, u.blockHashes, now());
    popularity.record(u.blockHashes, now());
    loads.onRouted(u.requestId, u.backendId, u.prefillTokens, now());
    if (u.affinityKey) affinity.set(u.affinityKey, u.backendId);
  }

  return {
    policy,
    index,
    addBackend(id, mode) {
      backends.add(id);
      index.setMode(id, mode);
    },
    removeBackend(id) {
      backends.delete(id);
      index.removeBackend(id);
      loads.removeBackend(id);
      affinity.removeBackend(id);
      streams.delete(id);
    },
    backendIds: () => [...backends],
    onKvStreamStart(id, snapshot) {
      streams.set(id, { inSnapshot: false });
      if (snapshot) index.clear(id);
    },
    onKvEvents(id, batch) {
      let state = streams.get(id);
      if (!state) {
        state = { inSnapshot: false };
        streams.set(id, state);
      }
      return applyKvBatch(index, id, state, batch);
    },
    onLoad(id, report) {
      loads.onLoad(id, report, now());
    },
    choose(req, candidates) {
      const v = views(req, candidates);
      if (v.length === 0) throw new NoBackendError();
      return policy.choose(req, v, rand);
    },
    views,
    onRouted(requestId, req, backendId) {
      const matched = index.match(req.blockHashes, [backendId], now(), hotDepth(req.blockHashes, now()))[0]!;
      const prefillTokens = Math.max(0, req.promptTokens - matched * req.blockSize);
      const update: RoutingUpdate = {
        kind: "routed",
        requestId,
        backendId,
        blockHashes: req.blockHashes,
        prefillTokens,
        affinityKey: req.affinityKey,
      };
      routed(update);
      options.onUpdate?.(update);
    },
    onFirstToken(requestId) {
      loads.onFirstToken(requestId);
      options.onUpdate?.({ kind: "first-token", requestId });
    },
    onFinished(requestId) {
      loads.onFinished(requestId);
      options.onUpdate?.({ kind: "finished", requestId });
    },
    applyRemote(update) {
      switch (update.kind) {
        case "routed":
          if (backends.has(update.backendId)) routed(update);
          break;
        case "first-token":
          loads.onFirstToken(update.requestId);
          break;
        case "finished":
          loads.onFinished(update.requestId);
          break;
      }
    },
  };
}
