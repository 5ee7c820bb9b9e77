/**
 * Least-outstanding: the backend with the fewest requests in flight from this
 * gateway; ties are broken uniformly at random through `rand`, so equal
 * backends share load instead of the first one taking every burst.
 *
 * @example
 * const lo = createLeastOutstandingPolicy();
 * lo.choose(req, [{ id: "a", outstanding: 3 }, { id: "b", outstanding: 1 }], Math.random).backendId; // "b"
 */
import type { RoutingPolicy } from "./policy";

export function createLeastOutstandingPolicy(): RoutingPolicy {
  return {
    name: "least-outstanding",
    choose(_req, backends, rand) {
      let min = Number.POSITIVE_INFINITY;
      let ties = 0;
      let pick = backends[0]!;
      for (const b of backends) {
        if (b.outstanding < min) {
          min = b.outstanding;
          pick = b;
          ties = 1;
        } else if (b.outstanding === min) {
          // Reservoir sampling over the tied minimum: each tie equally likely.
          ties++;
          if (rand() * ties < 1) pick = b;
        }
      }
      return { backendId: pick.id, reason: "least-outstanding" };
    },
  };
}
