/**
 * The setup and the runs the quick and the long fuzz share: one model server
 * behind a gateway process with a known body cap; a seeded batch of HTTP cases
 * sent to the gateway, summarised and grouped on stdout; a seeded batch of
 * Connect calls sent straight to a model server, summarised. The callers keep
 * their own assertions on what comes back.
 *
 * @example
 * const c = await startFuzzCluster();
 * const { cases, report, groups } = await runHttpFuzz(c, { label: "http", seed: 1, count: 100, concurrency: 6, stuckMs: 8000, deadlineMs: 45_000 });
 * expect(groups.map((g) => g.key)).toEqual([]);
 */
import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { type Cluster, startCluster } from "../support/cluster";
import { type ConnectCase, generateConnectCases } from "./connect-cases";
import { type ConnectReport, fuzzConnect } from "./connect-fuzz";
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

export interface ConnectFuzzRun {
  /** A client of the same server, for the callers' checks afterwards (Health, Generate). */
  client: Client<typeof ModelService>;
  modelId: string;
  cases: ConnectCase[];
  report: ConnectReport;
}

/** Asks the model server at `url` for its model, generates `count` Connect cases from `seed`, sends them, logs the summary (as `label`). */
export async function runConnectFuzz(
  url: string,
  o: { label: string; seed: number; count: number; concurrency: number; stuckMs: number; deadlineMs: number },
): Promise<ConnectFuzzRun> {
  const client = createClient(ModelService, createConnectTransport({ baseUrl: url, useBinaryFormat: true }));
  const info = await client.getModelInfo({});
  const cases = generateConnectCases({ seed: o.seed, count: o.count, model: info.modelId, vocab: info.vocabSize });
  const r = await fuzzConnect(url, cases, { concurrency: o.concurrency, stuckMs: o.stuckMs, deadlineMs: o.deadlineMs });
  console.log(JSON.stringify({ fuzz: o.label, seed: o.seed, sent: r.sent, ms: r.ms, failures: r.failures.length, libraryInternal: r.libraryInternal, answers: r.answers }));
  return { client, modelId: info.modelId, cases, report: r };
}
