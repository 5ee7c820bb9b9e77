/**
 * Pure core of Kubernetes discovery: EndpointSlices in, backends out. Follows
 * the EndpointSlice contract: an endpoint with `conditions.ready` unset counts
 * as ready; terminating or not-ready endpoints are skipped (the gateway stops
 * sending new work to a pod as soon as it starts draining); the same pod can
 * sit in two slices while the controller moves it, so results are deduplicated.
 */
import type { DiscoveredBackend } from "./discovery";

/** The fields of discovery.k8s.io/v1 EndpointSlice that discovery reads. */
export interface EndpointSlice {
  metadata: { name: string; resourceVersion?: string };
  addressType?: string;
  ports?: { name?: string | null; port?: number | null; protocol?: string }[] | null;
  endpoints?:
    | {
        addresses: string[];
        conditions?: { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null };
        targetRef?: { kind?: string; name?: string; namespace?: string };
        nodeName?: string;
        zone?: string;
      }[]
    | null;
}

/** Backends from the current slices; `portName` picks the slice port ("" = the first port). */
export function backendsFromSlices(slices: Iterable<EndpointSlice>, portName: string, kind: DiscoveredBackend["kind"] = "dispatch"): DiscoveredBackend[] {
  const out = new Map<string, DiscoveredBackend>();
  for (const s of slices) {
    if (s.addressType && s.addressType !== "IPv4" && s.addressType !== "IPv6") continue; // FQDN slices are not pods
    const port = (s.ports ?? []).find((p) => (portName ? p.name === portName : true))?.port;
    if (!port) continue;
    for (const e of s.endpoints ?? []) {
      if (e.conditions?.ready === false || e.conditions?.terminating === true) continue;
      const addr = e.addresses[0];
      if (!addr) continue;
      const host = addr.includes(":") ? `[${addr}]` : addr;
      const id = e.targetRef?.name ?? `${host}:${port}`;
      out.set(id, { id, url: `http://${host}:${port}`, kind, source: "kubernetes" });
    }
  }
  return [...out.values()].sort((a, b) => a.id.localeCompare(b.id));
}

/** Same list, same order? (Avoids waking consumers for no-op updates.) */
export function sameBackends(a: DiscoveredBackend[], b: DiscoveredBackend[]): boolean {
  return a.length === b.length && a.every((x, i) => x.id === b[i]!.id && x.url === b[i]!.url && x.kind === b[i]!.kind);
}
