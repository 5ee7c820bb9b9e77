/**
 * The policies the benchmark compares, each with the prefix information it
 * natively has: dispatch and llm-d consume the servers' KV events (exact);
 * SGLang's router builds its radix tree from its own routing (approximate,
 * also run on the exact index for comparison); the oracle reads the servers.
 */
import { createPolicy } from "@dispatch/gateway/src/routing/create-policy";
import type { RoutingPolicy } from "@dispatch/gateway/src/routing/policy";
import { createRoundRobinPolicy } from "@dispatch/gateway/src/routing/round-robin";
import { createOraclePolicy } from "./oracle";
import type { SimServer } from "./sim-server";

export interface BenchPolicy {
  label: string;
  indexMode: "exact" | "approximate";
  /** A baseline dispatch must beat (the oracle and dispatch itself are not). */
  baseline: boolean;
  make: (servers: ReadonlyMap<string, SimServer>) => RoutingPolicy;
  /** Router options for this policy's runs (defaults otherwise). */
  routerOptions?: { pendingTtlMs?: number; pendingHotShare?: number; pendingHotMargin?: number };
}

export const BENCH_POLICIES: BenchPolicy[] = [
  { label: "oracle", indexMode: "exact", baseline: false, make: (s) => createOraclePolicy(s) },
  { label: "dispatch", indexMode: "exact", baseline: false, make: () => createPolicy("dispatch") },
  // dispatch with its constants before 2026-11-29's change (index = reported blocks only, missWeight 1, affinity slack 50 ms), for comparison.
  { label: "dispatch@previous", indexMode: "exact", baseline: false, routerOptions: { pendingTtlMs: 0 }, make: () => createPolicy("dispatch", { dispatch: { missWeight: 1, affinitySlackMs: 50 } }) },
  { label: "sglang-cache-aware", indexMode: "approximate", baseline: true, make: () => createPolicy("sglang-cache-aware") },
  { label: "sglang-cache-aware@exact", indexMode: "exact", baseline: true, make: () => createPolicy("sglang-cache-aware") },
  { label: "llm-d-weighted", indexMode: "exact", baseline: true, make: () => createPolicy("llm-d-weighted") },
  { label: "consistent-hash", indexMode: "exact", baseline: true, make: () => createPolicy("consistent-hash") },
  { label: "least-load", indexMode: "exact", baseline: true, make: () => createPolicy("least-load") },
  { label: "power-of-two", indexMode: "exact", baseline: true, make: () => createPolicy("power-of-two") },
  { label: "round-robin", indexMode: "exact", baseline: true, make: () => createRoundRobinPolicy() },
];
