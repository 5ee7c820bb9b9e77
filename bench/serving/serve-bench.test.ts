/**
 * The serving client against the real thing: a CPU model server with the bundled model and
 * dispatch's gateway in front of it, on loopback. Exact output lengths (EOS ignored), the
 * concurrency limit and the metrics come back sane.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, ROOT, start, stopAll, waitReady, type Proc } from "../gateway/processes";
import { formatResult, runBench } from "./serve-bench";

const MODEL = join(ROOT, "model-server", "models", "tiny-wordnet-moe");
const procs: Proc[] = [];
afterAll(() => stopAll(procs));

test("bench client through the gateway to a CPU model server: exact lengths, all metrics", async () => {
  const msPort = await freePort();
  const server = start("model-server", ["model-server/src/main.ts", "--model", MODEL, "--port", String(msPort), "--backend", "cpu"], msPort);
  procs.push(server);
  const gwPort = await freePort();
  const gateway = start("gateway", ["gateway/src/main.ts", "--port", String(gwPort), "--backend", `dispatch=http://127.0.0.1:${msPort}`], gwPort);
  procs.push(gateway);
  const base = `http://127.0.0.1:${gwPort}`;
  let modelId = "";
  await waitReady(gateway, async () => {
    const r = await fetch(`${base}/v1/models`);
    const body = (await r.clone().json()) as { data?: { id: string }[] };
    modelId = body.data?.[0]?.id ?? "";
    return modelId ? r : new Response(null, { status: 503 });
  }, 30_000);

  const vocab = JSON.parse(readFileSync(join(MODEL, "config.json"), "utf8")).vocab_size as number;
  const r = await runBench({ baseUrl: base, model: modelId, numPrompts: 6, inputLen: 12, outputLen: 5, requestRate: Infinity, maxConcurrency: 2, vocab, seed: 1 });
  console.error(formatResult(r));
  expect(r.errors).toEqual([]);
  expect(r.summary.completed).toBe(6);
  expect(r.summary.outputTokens).toBe(30);
  expect(r.shortOutputs).toBe(0);
  expect(r.summary.ttftMs.p50).toBeGreaterThan(0);
  expect(r.summary.tpotMs.p50).toBeGreaterThan(0);
  expect(r.summary.itlMs.p99).toBeGreaterThanOrEqual(r.summary.itlMs.p50);
  expect(r.summary.e2eMs.max).toBeGreaterThanOrEqual(r.summary.ttftMs.max);

  // a workload of the same shape straight to the model server, its own prompts (the same ones would hit the prefix cache)
  const d = await runBench({ baseUrl: `http://127.0.0.1:${msPort}`, target: "rpc", model: modelId, numPrompts: 6, inputLen: 12, outputLen: 5, requestRate: Infinity, maxConcurrency: 2, vocab, seed: 2 });
  console.error(formatResult(d));
  expect(d.errors).toEqual([]);
  expect(d.summary.completed).toBe(6);
  expect(d.summary.outputTokens).toBe(30);
  expect(d.summary.ttftMs.p50).toBeGreaterThan(0);
}, 60_000);
