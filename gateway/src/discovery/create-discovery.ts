/**
 * Builds the gateway's discovery from settings: static entries always, plus
 * the Kubernetes EndpointSlice watch in `kubernetes` mode (in-cluster API,
 * namespace from the settings or the pod's own). The sources are combined
 * into one Discovery whose list is their union (first source wins an id).
 *
 * @example
 * const d = createDiscovery({ mode: "kubernetes", labelSelector: "kubernetes.io/service-name=dispatch-model-server", portName: "rpc" });
 * d.onChange((list) => pool.sync(list));
 * await d.start();
 */
import type { DiscoveredBackend, Discovery } from "./discovery";
import { createKubernetesApi, inClusterApi, type KubernetesApi } from "./kubernetes-api";
import { createKubernetesDiscovery } from "./kubernetes-discovery";
import { createStaticDiscovery } from "./static-discovery";

export interface DiscoverySettings {
  mode: "kubernetes" | "static";
  namespace?: string;
  labelSelector?: string;
  portName?: string;
  /** An API URL that needs no token (e.g. `kubectl proxy`); absent: in-cluster. */
  apiServer?: string;
  static?: { url: string; kind?: "dispatch" | "openai"; id?: string }[];
}

export function createDiscovery(
  s: DiscoverySettings,
  o: { env?: Record<string, string | undefined>; api?: KubernetesApi; onError?: (source: string, err: Error) => void } = {},
): Discovery {
  const sources: Discovery[] = [];
  if (s.static?.length) sources.push(createStaticDiscovery(s.static));
  if (s.mode === "kubernetes") {
    if (!s.labelSelector) throw new Error("kubernetes discovery needs a label selector (DISPATCH_DISCOVERY_LABEL_SELECTOR)");
    let api = o.api ?? (s.apiServer ? createKubernetesApi({ server: s.apiServer }) : undefined);
    let namespace = s.namespace;
    if (!api) {
      const inCluster = inClusterApi(o.env ?? process.env);
      api = inCluster.api;
      namespace ??= inCluster.namespace;
    }
    if (!namespace) throw new Error("kubernetes discovery needs a namespace (DISPATCH_DISCOVERY_NAMESPACE)");
    sources.push(
      createKubernetesDiscovery({ api, namespace, labelSelector: s.labelSelector, portName: s.portName ?? "rpc", onError: (e) => o.onError?.("kubernetes", e) }),
    );
  }
  return combine(sources);
}

/** One Discovery over several sources. */
export function combine(sources: Discovery[]): Discovery {
  const listeners = new Set<(b: DiscoveredBackend[]) => void>();
  const current = () => {
    const seen = new Map<string, DiscoveredBackend>();
    for (const src of sources) for (const b of src.current()) if (!seen.has(b.id)) seen.set(b.id, b);
    return [...seen.values()];
  };
  for (const src of sources) src.onChange(() => listeners.forEach((l) => l(current())));
  return {
    source: sources.map((s) => s.source).join("+") || "none",
    async start() {
      await Promise.all(sources.map((s) => s.start()));
    },
    stop: () => sources.forEach((s) => s.stop()),
    current,
    onChange(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  };
}
