/**
 * Round-robin: each decision takes the next backend in turn. The only state
 * is a counter (no clock, no randomness), so the sequence of choices is
 * deterministic for a given sequence of candidate lists.
 *
 * @example
 * const rr = createRoundRobinPolicy();
 * rr.choose(req, [{ id: "a", outstanding: 0 }, { id: "b", outstanding: 0 }], Math.random).backendId; // "a", then "b"
 */
import type { RoutingPolicy } from "./policy";

export function createRoundRobinPolicy(): RoutingPolicy {
  let next = 0;
  return {
    name: "round-robin",
    choose(_req, backends) {
      const b = backends[next % backends.length]!;
      next = (next + 1) % 1_000_000_007;
      return { backendId: b.id, reason: "round-robin" };
    },
  };
}
