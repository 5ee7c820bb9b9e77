/**
 * The discrete-event simulation: arrivals go through one or more REAL routers
 * (gateway/src/routing/router.ts with a real policy) to simulated servers,
 * whose KV events and load reports flow back into the routers exactly as the
 * gateway would receive them. Virtual time; deterministic for a given seed.
 */
import type { RoutingPolicy } from "@dispatch/gateway/src/routing/policy";
import { createRouter, type Router, type RoutingUpdate } from "@dispatch/gateway/src/routing/router";
import { EventHeap } from "./heap";
import { createRng, mixSeed } from "./rng";
import { SimServer, type EngineConfig } from "./sim-server";
import type { SimRequest, Workload } from "./workload";

export interface SimOptions {
  workload: Workload;
  engine: EngineConfig;
  servers: number;
  /** Mean arrival rate, requests per ms. */
  ratePerMs: number;
  /** Builds the policy of one gateway replica; `servers` lets the oracle see the truth. */
  policy: (servers: ReadonlyMap<string, SimServer>) => RoutingPolicy;
  seed: number;
  /** Gateway replicas; arrivals are spread over them in turn. Default 1. */
  replicas?: number;
  /** "exact": replicas get the servers' KV events; "approximate": only what was routed. Default exact. */
  indexMode?: "exact" | "approximate";
  /**
   * How replicas share routing updates. "none": not at all; "memory": at once,
   * in process; a function: the caller's transport (e.g. Redis), awaited after
   * each routing step so the run stays deterministic.
   */
  share?: "none" | "memory" | SharedTransport;
  /** Load report interval (ms of virtual time). Default 100, the proto's default. */
  loadIntervalMs?: number;
  /** Router options passed through (index TTLs and the like). */
  routerOptions?: { pendingTtlMs?: number; pendingHotShare?: number; pendingHotMargin?: number; approxCapacityBlocks?: number; approxTtlMs?: number };
}

export interface SharedTransport {
  /** Attach replica `i`: publish its updates, deliver others' to `apply`. */
  attach(i: number, apply: (u: RoutingUpdate) => void): (u: RoutingUpdate) => void;
  /** Resolves once every published update has reached every other replica (absent: delivery is synchronous). */
  settle?(): Promise<void>;
}

/** In-process sharing: each replica's updates are applied to the others at once. */
export function createMemoryTransport(): SharedTransport {
  const appliers: Array<(u: RoutingUpdate) => void> = [];
  return {
    attach(i, apply) {
      appliers[i] = apply;
      return (u) => appliers.forEach((a, j) => j !== i && a(u));
    },
  };
}

export interface SimResult {
  ttftMs: number[];
  hitTokens: number;
  promptTokens: number;
  busyMs: number[];
  /** Per server: prefill and per-sequence decode time (the load that routing moves). */
  workMs: number[];
  makespanMs: number;
  prefilledTokens: number;
  /** Routing decisions whose reason was each label. */
  reasons: Record<string, number>;
}

type Ev = { t: number; seq: number } & ({ kind: "arrive"; req: SimRequest } | { kind: "iter"; server: SimServer });

export async function simulate(o: SimOptions): Promise<SimResult> {
  const R = o.replicas ?? 1;
  const mode = o.indexMode ?? "exact";
  const interval = o.loadIntervalMs ?? 100;
  const servers = new Map<string, SimServer>();
  for (let i = 0; i < o.servers; i++) servers.set(`s${i}`, new SimServer(`s${i}`, o.engine));
  const list = [...servers.values()];

  let now = 0;
  const routers: Router[] = [];
  const transport = o.share === "memory" ? createMemoryTransport() : typeof o.share === "object" ? o.share : undefined;
  const settle = transport?.settle?.bind(transport);
  for (let i = 0; i < R; i++) {
    let publish: ((u: RoutingUpdate) => void) | undefined;
    const router = createRouter({
      policy: o.policy(servers),
      blockSize: o.engine.blockSize,
      rand: createRng(mixSeed(o.seed, 97, i)),
      now: () => now,
      index: {
        pendingTtlMs: o.routerOptions?.pendingTtlMs,
        approxCapacityBlocks: o.routerOptions?.approxCapacityBlocks ?? o.engine.kvBlocks,
        approxTtlMs: o.routerOptions?.approxTtlMs,
      },
      load: { ackLagMs: 0 },
      pendingHotShare: o.routerOptions?.pendingHotShare,
      pendingHotMargin: o.routerOptions?.pendingHotMargin,
      onUpdate: (u) => publish?.(u),
    });
    for (const s of list) router.addBackend(s.id, mode);
    routers.push(router);
    if (transport) publish = transport.attach(i, (u) => router.applyRemote(u));
  }

  const heap = new EventHeap<Ev>();
  const planned = o.workload.arrivals(o.ratePerMs, createRng(mixSeed(o.seed, 7)));
  const successor = new Map<number, SimRequest>();
  for (const req of o.workload.requests) {
    if (req.after === undefined) heap.push({ t: planned[req.id]!, kind: "arrive", req });
    else successor.set(req.after, req);
  }
  const owner = new Map<number, Router>();
  const ttft: number[] = [];
  const reasons: Record<string, number> = {};
  const lastReport = new Map<string, number>();
  const kvSeq = new Map<string, number>();
  let arrivals = 0;

  const report = (s: SimServer) => {
    lastReport.set(s.id, now);
    const load = s.load();
    for (const r of routers) r.onLoad(s.id, load);
  };
  const start = (s: SimServer) => {
    const ms = s.startIteration();
    if (ms === undefined) report(s);
    else heap.push({ t: now + ms, kind: "iter", server: s });
  };
  for (const s of list) report(s);

  for (let e = heap.pop(); e; e = heap.pop()) {
    now = e.t;
    if (e.kind === "arrive") {
      const router = routers[arrivals++ % R]!;
      const req = e.req;
      const rr = { blockHashes: req.promptHashes, promptTokens: req.promptTokens, blockSize: o.engine.blockSize, affinityKey: req.affinityKey };
      const d = router.choose(rr);
      reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
      router.onRouted(String(req.id), rr, d.backendId);
      owner.set(req.id, router);
      const s = servers.get(d.backendId)!;
      s.enqueue(req, now);
      if (!s.busy) start(s);
      if (settle) await settle();
      continue;
    }
    const s = e.server;
    const res = s.endIteration(now);
    if (res.events.length > 0 && mode === "exact") {
      const seq = (kvSeq.get(s.id) ?? 0) + 1;
      kvSeq.set(s.id, seq);
      const batch = { sequence: seq, events: res.events.map((event) => ({ event })) };
      for (const r of routers) r.onKvEvents(s.id, batch);
    }
    for (const f of res.firstTokens) {
      ttft.push(f.ttftMs);
      const r = owner.get(f.req.id)!;
      r.onFirstToken(String(f.req.id));
    }
    for (const req of res.finished) {
      const r = owner.get(req.id)!;
      r.onFinished(String(req.id));
      owner.delete(req.id);
      const next = successor.get(req.id);
      if (next) heap.push({ t: Math.max(planned[next.id]!, now), kind: "arrive", req: next });
    }
    if (now - (lastReport.get(s.id) ?? 0) >= interval) report(s);
    start(s);
    if (settle && (res.firstTokens.length > 0 || res.finished.length > 0)) await settle();
  }

  let hit = 0;
  let prompt = 0;
  let prefilled = 0;
  for (const s of list) {
    hit += s.hitTokens;
    prompt += s.promptTokens;
    prefilled += s.prefilledTokens;
  }
  if (ttft.length !== o.workload.requests.length) throw new Error(`simulation lost requests: ${ttft.length} of ${o.workload.requests.length} got a first token`);
  return { ttftMs: ttft, hitTokens: hit, promptTokens: prompt, busyMs: list.map((s) => s.busyMs), workMs: list.map((s) => s.workMs), makespanMs: now, prefilledTokens: prefilled, reasons };
}

