/**
 * Session affinity: the backend each affinity key (OpenAI `prompt_cache_key`,
 * or a header) last went to, in an LRU bounded to `capacity` keys.
 *
 * @example
 * const t = createAffinityTable(10_000);
 * t.set("user-42", "backend-a");
 * t.get("user-42"); // "backend-a"
 */
import { mapFront } from "@dispatch/common/src/map-front";

export interface AffinityTable {
  get(key: string): string | undefined;
  set(key: string, backendId: string): void;
  /** Forget every key pointing at a backend that left. */
  removeBackend(backendId: string): void;
  readonly size: number;
}

export function createAffinityTable(capacity = 100_000): AffinityTable {
  if (!(capacity > 0)) throw new RangeError(`affinity capacity must be > 0, got ${capacity}`);
  const map = new Map<string, string>();
  const front = mapFront(map);
  return {
    get: (key) => map.get(key),
    set(key, backendId) {
      map.delete(key);
      map.set(key, backendId);
      if (map.size > capacity) front.shift();
    },
    removeBackend(backendId) {
      for (const [k, v] of map) if (v === backendId) map.delete(k);
    },
    get size() {
      return map.size;
    },
  };
}
