/**
 * Least-load: the backend with the fewest requests (running + waiting, see
 * `requestLoad`), ties broken at random. Ignores the cache entirely: the
 * load-only baseline that throws prefix reuse away.
 *
 * @example
 * createLeastLoadPolicy().choose(req, backends, Math.random);
 */
import { argMin, decide, requestLoad } from "./load-score";
import type { RoutingPolicy } from "./policy";

export function createLeastLoadPolicy(): RoutingPolicy {
  return {
    name: "least-load",
    choose(_req, backends, rand) {
      const i = argMin(backends.map(requestLoad), rand);
      return decide(backends[i]!, "load");
    },
  };
}
