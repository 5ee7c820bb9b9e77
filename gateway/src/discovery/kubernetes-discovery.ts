/**
 * Kubernetes discovery: lists the EndpointSlices that match a label selector
 * in one namespace, then watches them (newline-delimited JSON events,
 * resuming from the last resourceVersion, with bookmarks). A watch that
 * expires (410 Gone) or fails starts over with a fresh list after a bounded,
 * jittered backoff; the last known list stays in effect meanwhile, so an API
 * server hiccup never empties the pool. Needs RBAC get/list/watch on
 * discovery.k8s.io endpointslices (the Helm chart makes that Role).
 *
 * @example
 * const { api, namespace } = inClusterApi();
 * const d = createKubernetesDiscovery({ api, namespace, labelSelector: "kubernetes.io/service-name=dispatch-model-server", portName: "rpc" });
 * d.onChange((list) => pool.sync(list));
 * await d.start();
 */
import type { DiscoveredBackend, Discovery } from "./discovery";
import { backendsFromSlices, type EndpointSlice, sameBackends } from "./endpoint-slices";
import { KubernetesApiError, type KubernetesApi } from "./kubernetes-api";

export interface KubernetesDiscoveryOptions {
  api: KubernetesApi;
  namespace: string;
  labelSelector: string;
  /** EndpointSlice port name of the model server's API ("" = first port). */
  portName: string;
  kind?: DiscoveredBackend["kind"];
  /** Server-side watch timeout; the watch is renewed when it ends. */
  watchTimeoutS?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Errors are reported here (log/metrics), never thrown at the caller. */
  onError?: (err: Error) => void;
}

interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: EndpointSlice & { code?: number; message?: string };
}

export function createKubernetesDiscovery(o: KubernetesDiscoveryOptions): Discovery {
  const base = `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(o.namespace)}/endpointslices`;
  const selector = `labelSelector=${encodeURIComponent(o.labelSelector)}`;
  const minBackoff = o.minBackoffMs ?? 500;
  const maxBackoff = o.maxBackoffMs ?? 30_000;
  const slices = new Map<string, EndpointSlice>();
  const listeners = new Set<(b: DiscoveredBackend[]) => void>();
  let current: DiscoveredBackend[] = [];
  let abort: AbortController | undefined;
  let running = false;

  const publish = () => {
    const next = backendsFromSlices(slices.values(), o.portName, o.kind);
    if (sameBackends(next, current)) return;
    current = next;
    for (const l of listeners) l(next);
  };

  async function list(signal: AbortSignal): Promise<string> {
    const res = await o.api.get(`${base}?${selector}`, signal);
    const body = (await res.json()) as { metadata?: { resourceVersion?: string }; items?: EndpointSlice[] };
    slices.clear();
    for (const s of body.items ?? []) slices.set(s.metadata.name, s);
    publish();
    return body.metadata?.resourceVersion ?? "";
  }

  /** Follows one watch until it ends; returns the resourceVersion to resume from, or undefined to relist. */
  async function watch(rv: string, signal: AbortSignal): Promise<string | undefined> {
    const q = `${selector}&watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}&timeoutSeconds=${o.watchTimeoutS ?? 300}`;
    const res = await o.api.get(`${base}?${q}`, signal);
    if (!res.body) return rv;
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const ev = JSON.parse(line) as WatchEvent;
        if (ev.type === "ERROR") {
          if (ev.object.code === 410) return undefined; // too old: relist
          throw new KubernetesApiError(ev.object.code ?? 500, `watch error: ${ev.object.message ?? "unknown"}`);
        }
        rv = ev.object.metadata?.resourceVersion ?? rv;
        if (ev.type === "BOOKMARK") continue;
        if (ev.type === "DELETED") slices.delete(ev.object.metadata.name);
        else slices.set(ev.object.metadata.name, ev.object);
        publish();
      }
    }
    return rv;
  }

  async function loop(signal: AbortSignal, firstList: (err?: Error) => void) {
    let backoff = minBackoff;
    let rv: string | undefined;
    while (!signal.aborted) {
      try {
        if (rv === undefined) {
          rv = await list(signal);
          firstList();
        }
        rv = await watch(rv, signal);
        backoff = minBackoff;
      } catch (err) {
        if (signal.aborted) return;
        const e = err as Error;
        o.onError?.(e);
        firstList(e);
        rv = undefined;
        const wait = backoff / 2 + Math.random() * (backoff / 2);
        backoff = Math.min(maxBackoff, backoff * 2);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, wait);
          signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
        });
      }
    }
  }

  return {
    source: "kubernetes",
    start() {
      if (running) return Promise.resolve();
      running = true;
      abort = new AbortController();
      return new Promise<void>((resolve) => {
        let done = false;
        void loop(abort!.signal, () => {
          if (!done) (done = true), resolve();
        });
      });
    },
    stop() {
      running = false;
      abort?.abort();
    },
    current: () => current.slice(),
    onChange(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  };
}
