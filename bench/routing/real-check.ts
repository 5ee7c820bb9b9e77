/**
 * The real check: 4 real CPU model servers (model-server/src/main.ts with the
 * bundled tiny model) behind the gateway's routing stack (this router with
 * the chosen policy, fed by the servers' own WatchKvEvents / WatchLoad
 * streams through the gateway's RPC client), on a small shared-prefix
 * workload. It records the cache hits the servers report (Generate usage:
 * cached_prompt_tokens) and compares them with what the simulator predicts
 * for the same requests, the same send times, the same KV size and batch
 * limits, and engine speeds taken from the servers' load reports.
 *
 *   bun bench/routing/real-check.ts [--policy dispatch] [--groups 16] [--per-group 8] [--gap-ms 40]
 *
 * Writes bench/routing/results/real-check-<policy>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { createPolicy } from "@dispatch/gateway/src/routing/create-policy";
import type { RoutingPolicy } from "@dispatch/gateway/src/routing/policy";
import { createRoundRobinPolicy } from "@dispatch/gateway/src/routing/round-robin";
import { createRouter } from "@dispatch/gateway/src/routing/router";
import { createModelClient, type ModelClient } from "@dispatch/gateway/src/rpc/model-client";
import { bundledModelDir, startServer, type RunningServer } from "@dispatch/model-server/test/harness";
import { summarize } from "./metrics";
import { createRng, mixSeed, shuffle } from "./rng";
import { simulate } from "./simulate";
import type { SimRequest, Workload } from "./workload";

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : dflt;
};
const POLICY = arg("policy", "dispatch");
const GROUPS = Number(arg("groups", "16"));
const PER_GROUP = Number(arg("per-group", "8"));
const GAP_MS = Number(arg("gap-ms", "40"));
const SERVERS = 4;
const makePolicy = () => createPolicy(POLICY, { extra: { "round-robin": createRoundRobinPolicy } });
const SYSTEM = 256;
const QUESTION = 32;
const OUTPUT = 8;
const KV_BLOCKS = 96;
const BLOCK = 16;
const MAX_SEQS = 8;
const BATCH_TOKENS = 256;

interface Sent {
  req: SimRequest;
  at: number;
  backend: string;
  cached: number;
  ttftMs: number;
}

async function main(): Promise<void> {
  const model = bundledModelDir();
  const args = ["--block-size", String(BLOCK), "--kv-blocks", String(KV_BLOCKS), "--max-num-seqs", String(MAX_SEQS), "--max-batch-tokens", String(BATCH_TOKENS)];
  const servers: RunningServer[] = [];
  const abort = new AbortController();
  try {
    for (let i = 0; i < SERVERS; i++) servers.push(await startServer({ model, args: [...args, "--server-id", `ms-${i}`] }));
    const clients = servers.map((s) => createModelClient({ url: s.url, protocol: "connect" }));
    const info = await clients[0]!.modelInfo(AbortSignal.timeout(5000));
    if (info.blockSize !== BLOCK) throw new Error(`server block size ${info.blockSize}, expected ${BLOCK}`);
    const router = createRouter({ policy: makePolicy(), blockSize: BLOCK, rand: createRng(1) });
    const rates: Array<{ prefill: number; step: number }> = [];
    clients.forEach((c, i) => {
      const id = `ms-${i}`;
      router.addBackend(id, "exact");
      router.onKvStreamStart(id, true);
      void watch(async () => {
        for await (const b of c.watchKvEvents(true, abort.signal)) router.onKvEvents(id, b);
      });
      void watch(async () => {
        for await (const l of c.watchLoad(50, abort.signal)) {
          router.onLoad(id, l);
          if (l.prefillTokensPerS > 0 && l.decodeStepsPerS > 0) rates.push({ prefill: l.prefillTokensPerS, step: 1000 / l.decodeStepsPerS });
        }
      });
    });
    await Bun.sleep(200);

    const requests = makeRequests(info.modelId);
    const t0 = performance.now();
    const sent: Sent[] = [];
    const inflight: Promise<void>[] = [];
    for (const [k, req] of requests.entries()) {
      const due = t0 + k * GAP_MS;
      const wait = due - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      inflight.push(send(router, clients, info.modelId, req, t0, sent));
    }
    await Promise.all(inflight);

    const prompt = sent.reduce((a, s) => a + s.req.promptTokens, 0);
    const realHit = sent.reduce((a, s) => a + s.cached, 0) / prompt;
    const prefillRate = median(rates.map((r) => r.prefill));
    const stepMs = median(rates.map((r) => r.step));
    const byId = [...sent].sort((a, b) => a.req.id - b.req.id);
    const workload: Workload = {
      name: "real-check",
      description: "the real run's requests and send times",
      requests: byId.map((s) => s.req),
      kvTokensPerServer: KV_BLOCKS * BLOCK,
      arrivals: () => byId.map((s) => s.at),
    };
    const engine = { blockSize: BLOCK, kvBlocks: KV_BLOCKS, chunkTokens: BATCH_TOKENS, maxBatch: MAX_SEQS, prefillMsPerToken: 1000 / prefillRate, stepBaseMs: stepMs, stepPerSeqMs: 0 };
    const base = { workload, engine, servers: SERVERS, ratePerMs: 1, seed: 1 };
    // (a) The simulator routes by itself with the same policy: the whole-system prediction.
    const sim = summarize(await simulate({ ...base, policy: makePolicy }));
    // (b) The simulator replays the real run's placements: the server (KV cache) model alone.
    const placed = new Map(byId.map((x) => [x.req.promptHashes, `s${x.backend.slice(3)}`]));
    const replayed: RoutingPolicy = {
      name: "replay",
      choose: (r) => ({ backendId: placed.get(r.blockHashes)!, reason: "replay" }),
    };
    const replay = summarize(await simulate({ ...base, policy: () => replayed }));
    const ttfts = sent.map((s) => s.ttftMs).sort((a, b) => a - b);
    const result = {
      date: new Date().toISOString().slice(0, 10),
      command: `bun bench/routing/real-check.ts ${process.argv.slice(2).join(" ")}`.trim(),
      policy: POLICY,
      servers: SERVERS,
      requests: sent.length,
      shape: { groups: GROUPS, perGroup: PER_GROUP, systemTokens: SYSTEM, questionTokens: QUESTION, outputTokens: OUTPUT, gapMs: GAP_MS },
      serverConfig: { blockSize: BLOCK, kvBlocks: KV_BLOCKS, maxNumSeqs: MAX_SEQS, maxBatchTokens: BATCH_TOKENS, model },
      measuredEngine: { prefillTokensPerS: prefillRate, decodeStepMs: stepMs },
      realHitRate: realHit,
      simulatedHitRate: sim.hitRate,
      relativeDifference: Math.abs(realHit - sim.hitRate) / sim.hitRate,
      replayedPlacementsHitRate: replay.hitRate,
      replayRelativeDifference: Math.abs(realHit - replay.hitRate) / replay.hitRate,
      realTtftP50Ms: ttfts[Math.floor(ttfts.length / 2)],
      perBackend: Object.fromEntries([...new Set(sent.map((s) => s.backend))].sort().map((b) => [b, sent.filter((s) => s.backend === b).length])),
    };
    console.log(JSON.stringify(result, null, 2));
    const dir = join(import.meta.dir, "results");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `real-check-${POLICY}.json`), `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    abort.abort();
    await Promise.all(servers.map((s) => s.stop()));
  }
}

function makeRequests(modelId: string): SimRequest[] {
  const root = rootHash(modelId);
  const tokens = (seed: number, n: number) => {
    const r = createRng(seed);
    return Array.from({ length: n }, () => 10 + Math.floor(r() * 4000));
  };
  const system = Array.from({ length: GROUPS }, (_, g) => tokens(mixSeed(7, g), SYSTEM));
  const order = shuffle(createRng(5), Array.from({ length: GROUPS * PER_GROUP }, (_, i) => i % GROUPS));
  return order.map((g, id) => {
    const prompt = system[g]!.concat(tokens(mixSeed(9, id), QUESTION));
    const hashes = hashBlocks(prompt, BLOCK, root);
    return { id, promptTokens: prompt.length, outputTokens: OUTPUT, promptHashes: hashes, seqHashes: hashes, tokens: prompt } as SimRequest & { tokens: number[] };
  });
}

async function send(router: ReturnType<typeof createRouter>, clients: ModelClient[], modelId: string, req: SimRequest, t0: number, out: Sent[]): Promise<void> {
  const at = performance.now() - t0;
  const rr = { blockHashes: req.promptHashes, promptTokens: req.promptTokens, blockSize: BLOCK, expectedOutputTokens: OUTPUT };
  const d = router.choose(rr);
  const id = `r${req.id}`;
  router.onRouted(id, rr, d.backendId);
  const client = clients[Number(d.backendId.slice(3))]!;
  let cached = 0;
  let ttft = -1;
  try {
    for await (const step of client.generate(
      { requestId: id, model: modelId, promptTokenIds: Uint32Array.from((req as SimRequest & { tokens: number[] }).tokens), temperature: 0, maxTokens: OUTPUT, stopTokenIds: [], ignoreEos: true },
      AbortSignal.timeout(60_000),
    )) {
      if (ttft < 0 && step.tokenIds.length > 0) {
        ttft = performance.now() - t0 - at;
        router.onFirstToken(id);
      }
      if (step.usage) cached = step.usage.cachedPromptTokens;
    }
  } finally {
    router.onFinished(id);
  }
  out.push({ req, at, backend: d.backendId, cached, ttftMs: ttft });
}

async function watch(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch {
    // Streams end with the run (abort).
  }
}

function median(xs: number[]): number {
  if (xs.length === 0) throw new Error("no load report carried engine rates");
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

main().catch((err) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(1);
});
