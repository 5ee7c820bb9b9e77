/**
 * Model-server discovery: where the gateway's backend list comes from. A
 * source emits the full current list on every change (not deltas), so a
 * consumer can diff against its pool and never drift. Implementations are
 * siblings: static-discovery.ts (config) and kubernetes-discovery.ts
 * (EndpointSlices watched through the API server).
 */
export interface DiscoveredBackend {
  /** Stable across restarts of the same pod/entry: the pod name, or host:port. */
  id: string;
  /** Base URL, e.g. http://10.1.2.3:50051 */
  url: string;
  kind: "dispatch" | "openai";
  /** Which source found it ("static", "kubernetes"). */
  source: string;
}

export interface Discovery {
  readonly source: string;
  /** Begins discovery; resolves after the first complete list (or the first failure, which is retried). */
  start(): Promise<void>;
  stop(): void;
  current(): DiscoveredBackend[];
  /** Called with the full list whenever it changes; returns an unsubscribe function. */
  onChange(listener: (backends: DiscoveredBackend[]) => void): () => void;
}
