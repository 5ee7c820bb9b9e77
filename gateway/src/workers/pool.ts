/**
 * The backend pool: who is healthy, what each serves, and how many requests
 * this gateway has in flight to each. Health changes come from active probes
 * (`health-checker.ts`) and from passive reports of failed calls: a backend is
 * ejected after `unhealthyAfter` consecutive failures and returns after
 * `healthyAfter` consecutive successful probes.
 *
 * @example
 * const pool = createBackendPool([backend], { unhealthyAfter: 2, healthyAfter: 1 });
 * pool.candidates("qwen"); // BackendView[] of healthy backends serving it
 */
import type { BackendView } from "../routing/policy";
import type { ModelProfile } from "../tokenize/model-profile";
import type { Backend } from "./backend";

export interface Member {
  readonly backend: Backend;
  healthy: boolean;
  outstanding: number;
  failures: number;
  successes: number;
  lastError: string | null;
  /** Probed at least once (healthy or not). */
  probed: boolean;
}

export interface BackendPool {
  readonly members: readonly Member[];
  get(id: string): Member | undefined;
  /** Healthy backends serving `model`, as routing views (excluding ids in `exclude`). */
  candidates(model: string, exclude?: ReadonlySet<string>): BackendView[];
  /** Whether any backend (healthy or not) has served `model`. */
  knows(model: string): boolean;
  /** Models served by at least one healthy backend. */
  models(): string[];
  /** The dispatch model profile for `model`, from any backend that has one. */
  profile(model: string): ModelProfile | undefined;
  ready(): boolean;
  acquire(id: string): void;
  release(id: string): void;
  reportSuccess(id: string): void;
  reportFailure(id: string, reason: string): void;
  /** A call started fine: consecutive failures start again from zero (cheap, no reindex). */
  reportCallOk(id: string): void;
  /** Called when a member turns healthy or unhealthy. */
  onChange(fn: (m: Member) => void): void;
  /** A discovered backend joins (unhealthy until its first good probe). */
  add(backend: Backend): void;
  /** A backend leaves (discovery): no new requests; calls in flight finish on their own. */
  remove(id: string): void;
}

export interface PoolOptions {
  unhealthyAfter: number;
  healthyAfter: number;
}

export function createBackendPool(backends: readonly Backend[], o: PoolOptions): BackendPool {
  const members: Member[] = backends.map((backend) => ({
    backend,
    healthy: false,
    outstanding: 0,
    failures: 0,
    successes: 0,
    lastError: null,
    probed: false,
  }));
  const byId = new Map(members.map((m) => [m.backend.id, m]));
  const listeners: ((m: Member) => void)[] = [];
  let byModel = new Map<string, Member[]>();
  const everServed = new Set<string>();

  function reindex(): void {
    const next = new Map<string, Member[]>();
    for (const m of members) {
      for (const model of m.backend.models()) {
        everServed.add(model);
        if (!m.healthy) continue;
        let list = next.get(model);
        if (!list) next.set(model, (list = []));
        list.push(m);
      }
    }
    byModel = next;
  }

  function setHealthy(m: Member, healthy: boolean): void {
    const changed = m.healthy !== healthy;
    m.healthy = healthy;
    // Models may change on a successful probe even without a health change.
    reindex();
    if (changed) for (const fn of listeners) fn(m);
  }

  return {
    members,
    get: (id) => byId.get(id),
    candidates(model, exclude) {
      const list = byModel.get(model);
      if (!list) return [];
      const out: BackendView[] = [];
      for (const m of list) {
        if (exclude?.has(m.backend.id)) continue;
        out.push({ id: m.backend.id, outstanding: m.outstanding });
      }
      return out;
    },
    knows: (model) => everServed.has(model),
    models: () => [...byModel.keys()],
    profile(model) {
      for (const m of byModel.get(model) ?? members) {
        const p = m.backend.profile(model);
        if (p) return p;
      }
      return undefined;
    },
    ready: () => byModel.size > 0,
    acquire(id) {
      const m = byId.get(id);
      if (m) m.outstanding++;
    },
    release(id) {
      const m = byId.get(id);
      if (m && m.outstanding > 0) m.outstanding--;
    },
    reportSuccess(id) {
      const m = byId.get(id);
      if (!m) return;
      m.probed = true;
      m.failures = 0;
      m.successes++;
      m.lastError = null;
      if (!m.healthy && m.successes >= o.healthyAfter) setHealthy(m, true);
      else if (m.healthy) reindex();
    },
    reportFailure(id, reason) {
      const m = byId.get(id);
      if (!m) return;
      m.probed = true;
      m.successes = 0;
      m.failures++;
      m.lastError = reason;
      if (m.healthy && m.failures >= o.unhealthyAfter) setHealthy(m, false);
    },
    reportCallOk(id) {
      const m = byId.get(id);
      if (m && m.failures !== 0) m.failures = 0;
    },
    onChange: (fn) => void listeners.push(fn),
    add(backend) {
      if (byId.has(backend.id)) return;
      const m: Member = { backend, healthy: false, outstanding: 0, failures: 0, successes: 0, lastError: null, probed: false };
      members.push(m);
      byId.set(backend.id, m);
    },
    remove(id) {
      const m = byId.get(id);
      if (!m) return;
      byId.delete(id);
      members.splice(members.indexOf(m), 1);
      reindex();
      if (m.healthy) {
        m.healthy = false;
        for (const fn of listeners) fn(m);
      }
    },
  };
}
