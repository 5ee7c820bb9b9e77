/**
 * What changed between two discovery lists, for a pool that adds and removes
 * members: ids that appeared, ids that went away, and ids whose URL or kind
 * changed (a pod that came back on a new IP: remove the old member, add the new).
 *
 * @example
 * const { added, removed } = diffBackends(pool.members.map(toDiscovered), next);
 */
import type { DiscoveredBackend } from "./discovery";

export interface BackendDiff {
  added: DiscoveredBackend[];
  removed: string[];
}

export function diffBackends(prev: readonly DiscoveredBackend[], next: readonly DiscoveredBackend[]): BackendDiff {
  const before = new Map(prev.map((b) => [b.id, b]));
  const after = new Map(next.map((b) => [b.id, b]));
  const added: DiscoveredBackend[] = [];
  const removed: string[] = [];
  for (const [id, b] of before) {
    const n = after.get(id);
    if (!n || n.url !== b.url || n.kind !== b.kind) removed.push(id);
  }
  for (const [id, n] of after) {
    const b = before.get(id);
    if (!b || b.url !== n.url || b.kind !== n.kind) added.push(n);
  }
  return { added, removed };
}
