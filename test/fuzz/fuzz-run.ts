/**
 * The setup and the HTTP run the quick and the long fuzz share: one model
 * server behind a gateway process with a known body cap, and a seeded batch of
 * HTTP cases sent, summarised and grouped on stdout. The callers keep their
 * own assertions on what comes back.
 *
 * @example
 * const c = await startFuzzCluster();
 * const { cases, report, groups } = await runHttpFuzz(c, { label: "http", seed: 1, count: 100, concurrency: 6, stuckMs: 8000, deadlineMs: 45_000 });
 * expect(groups.map((g) => g.key)).toEqual([]);
 */
import { type Cluster, startCluster } from "../support/cluster";
import { generateHttpCases, type HttpCase } from "./http-cases";
import { type FuzzReport, fuzzHttp, groupFailures } from "./http-fuzz";

/** The gateway's DISPATCH_SERVER_MAX_BODY_BYTES under fuzz; the cases include bodies just past it. */
export const FUZZ_MAX_BODY = 65_536;

export function startFuzzCluster(): Promise<Cluster> {
  return startCluster({ servers: 1, gatewayEnv: { DISPATCH_SERVER_MAX_BODY_BYTES: String(FUZZ_MAX_BODY) } });
}

export interface HttpFuzzRun {
  cases: HttpCase[];
  report: FuzzReport;
  groups: ReturnType<typeof groupFailures>;
}

/** Generates `count` cases from `seed`, sends them to the cluster's gateway, logs the summary (as `label`) and each failure group. */
export async function runHttpFuzz(
  c: Cluster,
  o: { label: string; seed: number; count: number; concurrency: number; stuckMs: number; deadlineMs: number },
): Promise<HttpFuzzRun> {
  const cases = generateHttpCases({ seed: o.seed, count: o.count, model: c.model, maxBodyBytes: FUZZ_MAX_BODY });
  const r = await fuzzHttp(c.gateway.url, cases, { concurrency: o.concurrency, stuckMs: o.stuckMs, deadlineMs: o.deadlineMs });
  console.log(JSON.stringify({ fuzz: o.label, seed: o.seed, sent: r.sent, ms: r.ms, failures: r.failures.length, byCategory: r.byCategory }));
  const groups = groupFailures(r.failures);
  for (const g of groups) console.log(`${g.count} x ${g.key}\n    e.g. case ${g.example.index}: ${g.example.body.slice(0, 200)}`);
  return { cases, report: r, groups };
}
